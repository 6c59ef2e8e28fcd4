// examples/worker.ts runs as its header says, against the real binary.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { Server } from "./server.js";

test("the example worker admits and completes its orders, and a second run finds them admitted", async () => {
  const server = await Server.start(["--nosync"]);
  try {
    const example = join(import.meta.dirname, "..", "examples", "worker.js");
    for (let run = 0; run < 2; run++) {
      const { stdout } = await promisify(execFile)("node", [example], { env: { ...process.env, EXECSTORE_URL: server.url }, timeout: 60_000 });
      const lines = stdout.trim().split("\n");
      assert.equal(lines.length, 20, stdout);
      for (const [i, line] of lines.entries()) {
        assert.equal(line, `order-${i + 1} completed {"receipt":"r-${i + 1}","total":${(i + 1) * 10}}`);
      }
    }
  } finally {
    await server.stop();
  }
});
