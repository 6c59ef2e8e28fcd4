// A fake execstore in the test process: it forwards each request to a real
// server, and lets a test change a request or its answer on the way. It
// produces on demand what the binary does not: a 503 with Retry-After, a
// batch refused whole, a per-item NOT_LEADER, a claim answered without its
// executions, a read that fails.
import { createServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";

/** A request as the proxy got it; body is the parsed JSON, or undefined. */
export interface Exchange {
  method: string;
  path: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** An answer to send back; body is sent as JSON. */
export interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  headers?: Record<string, string>;
}

/** Sends the request on to the real server, with body in place of the request's when given. */
export type Forward = (body?: unknown) => Promise<Answer>;

/** Answers one request: forward(req.body) unchanged, or anything else. */
export type Handle = (req: Exchange, forward: Forward) => Promise<Answer> | Answer;

export class Proxy {
  readonly url: string;
  private readonly server: HttpServer;

  private constructor(server: HttpServer) {
    this.server = server;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  static async start(target: string, handle: Handle): Promise<Proxy> {
    const server = createServer((req, res) => {
      void (async () => {
        const text = await readBody(req);
        const ex: Exchange = { method: req.method ?? "GET", path: req.url ?? "/", body: text === "" ? undefined : JSON.parse(text) };
        const forward: Forward = async (body = ex.body) => {
          const r = await fetch(target + ex.path, {
            method: ex.method,
            headers: body === undefined ? {} : { "content-type": "application/json" },
            body: body === undefined ? null : JSON.stringify(body),
          });
          const t = await r.text();
          return { status: r.status, body: t === "" ? undefined : JSON.parse(t) };
        };
        let answer: Answer;
        try {
          answer = await handle(ex, forward);
        } catch (err) {
          answer = { status: 500, body: { code: "INTERNAL", message: `proxy: ${(err as Error).message}` } };
        }
        res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers });
        res.end(answer.body === undefined ? "" : JSON.stringify(answer.body));
      })();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return new Proxy(server);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Whether the request carries acknowledgements (a batch, a round, or one alone). */
export function isAcknowledgement(req: Exchange): boolean {
  return req.method === "POST" && ["/v1/leases/acknowledge", "/v1/leases/acknowledge-batch", "/v1/leases/acknowledge-and-claim"].includes(req.path);
}

/** The execution IDs a request acknowledges. */
export function acknowledged(req: Exchange): string[] {
  if (!isAcknowledgement(req)) return [];
  if (req.path === "/v1/leases/acknowledge") return [req.body.lease.executionId];
  return (req.body.acknowledgements as { lease: { executionId: string } }[]).map((a) => a.lease.executionId);
}
