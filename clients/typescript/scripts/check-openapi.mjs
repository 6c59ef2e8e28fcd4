// The check CI runs on openapi.yaml, from this package's pinned tools:
//  1. Redocly's recommended lint (redocly.yaml), at zero errors and warnings;
//  2. src/schema.d.ts is what openapi-typescript generates from the document
//     now (run `npm run generate` after changing it);
//  3. test/types.ts type-checks against those types: what a user must be able
//     to write compiles, and every @ts-expect-error refusal still refuses;
//  4. a second generator, @hey-api/openapi-ts, generates types too, and
//     test/heyapi.ts type-checks against them;
//  5. the README's TypeScript snippet type-checks against this package.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const bin = (name) => join("node_modules", ".bin", name);
const run = (what, cmd, args) => {
  process.stdout.write(`check-openapi: ${what}\n`);
  try {
    execFileSync(cmd, args, { stdio: "inherit" });
  } catch {
    console.error(`check-openapi: ${what} failed (above)`);
    process.exitCode = 1;
    throw new Error("stop");
  }
};

run("lint (redocly, recommended rules)", bin("redocly"), ["lint", "--config", "redocly.yaml", "--max-problems", "50", "../../openapi.yaml"]);

const scratch = mkdtempSync(join(tmpdir(), "execstore-openapi-"));
try {
  const fresh = join(scratch, "schema.d.ts");
  run("generate (openapi-typescript)", bin("openapi-typescript"), ["../../openapi.yaml", "-o", fresh]);
  if (readFileSync(fresh, "utf8") !== readFileSync("src/schema.d.ts", "utf8")) {
    console.error("check-openapi: src/schema.d.ts is stale; run `npm run generate` and commit it");
    process.exit(1);
  }
  run("type-check test/types.ts", bin("tsc"), ["-p", "."]);
  run("generate (@hey-api/openapi-ts)", bin("openapi-ts"), ["-i", "../../openapi.yaml", "-o", "generated-heyapi", "--silent"]);
  run("type-check test/heyapi.ts", bin("tsc"), ["-p", "tsconfig.heyapi.json"]);
  const readme = readFileSync("../../README.md", "utf8").match(/```ts\n([\s\S]*?)```/);
  if (!readme) {
    console.error("check-openapi: the README has no TypeScript snippet");
    process.exit(1);
  }
  writeFileSync("readme-snippet.check.ts", readme[1].replaceAll('"@execstore/client"', '"./src/index.js"') + "\nexport {};\n");
  run("type-check the README's TypeScript snippet", bin("tsc"), ["-p", "tsconfig.readme.json"]);
} catch (err) {
  if (err.message !== "stop") throw err;
} finally {
  rmSync(scratch, { recursive: true, force: true });
  rmSync("generated-heyapi", { recursive: true, force: true });
  rmSync("readme-snippet.check.ts", { force: true });
}
