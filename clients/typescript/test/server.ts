// The real binary, built from this repository and started by the tests on
// 127.0.0.1, on a port of its own and a data directory of its own.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repo = resolve(import.meta.dirname, "..", "..", "..", "..");
let built: string | undefined;

/** Builds cmd/execstore once per test process. */
function binary(): string {
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), "execstore-bin-"));
    built = join(dir, "execstore");
    execFileSync("go", ["build", "-o", built, "./cmd/execstore"], { cwd: repo, stdio: "inherit" });
  }
  return built;
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      s.close(() => (typeof addr === "object" && addr ? res(addr.port) : rej(new Error("no port"))));
    });
  });
}

/** A server of the real binary: start, kill -9, start again on the same data. */
export class Server {
  readonly url: string;
  private readonly addr: string;
  private readonly data: string;
  private readonly extra: string[];
  private proc: ChildProcess | undefined;

  private constructor(port: number, data: string, extra: string[]) {
    this.addr = `127.0.0.1:${port}`;
    this.url = `http://${this.addr}`;
    this.data = data;
    this.extra = extra;
  }

  static async start(extra: string[] = []): Promise<Server> {
    const s = new Server(await freePort(), mkdtempSync(join(tmpdir(), "execstore-data-")), extra);
    await s.up();
    return s;
  }

  /** Starts the binary (again) and waits until /healthz answers. */
  async up(): Promise<void> {
    this.proc = spawn(binary(), ["serve", "--data", this.data, "--addr", this.addr, "--log-level", "error", ...this.extra], { stdio: ["ignore", "ignore", "inherit"] });
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const res = await fetch(`${this.url}/healthz`);
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`the server at ${this.url} did not start`);
      if (this.proc.exitCode !== null) throw new Error(`the server exited with ${this.proc.exitCode}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** kill -9: no drain, no clean close. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await exited;
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (p && p.exitCode === null) {
      const exited = new Promise((r) => p.once("exit", r));
      p.kill("SIGTERM");
      await exited;
    }
    rmSync(this.data, { recursive: true, force: true });
  }
}
