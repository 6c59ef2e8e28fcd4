// The Worker against the real binary: every execution completes once with
// its steps run once, a lost lease aborts the delivery, a rejection releases
// it, an abandoned delivery frees its slot, and a server killed with
// SIGKILL mid-run loses nothing.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client, ExitWithoutReply, Failure, Worker, type DeliveryContext, type WorkerEvent } from "../src/index.js";
import { Server } from "./server.js";

type Order = { order: number };

/** Polls until check holds, failing after patience: never an expectation about speed. */
async function eventually(what: string, check: () => Promise<boolean> | boolean, patience = 30_000): Promise<void> {
  const deadline = Date.now() + patience;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${patience} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function admitOrders(client: Client, prefix: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  for (const id of ids) await client.admit<Order>({ executionId: id, workflowId: "charge", params: { order: Number(id.split("-").pop()) } });
  return ids;
}

describe("Worker", () => {
  let server: Server;
  let client: Client;
  before(async () => {
    server = await Server.start(["--nosync"]);
    client = new Client({ baseUrl: server.url, retryBaseDelayMs: 20 });
  });
  after(() => server.stop());

  test("completes every execution once, each step run once, in few requests", async (t) => {
    const ran = new Map<string, number>();
    const outcomes = new Map<string, unknown>();
    const charge = async (ctx: DeliveryContext<Order>) => {
      const receipt = await ctx.step("charge", () => {
        ran.set(ctx.executionId, (ran.get(ctx.executionId) ?? 0) + 1);
        return { receipt: `r-${ctx.params.order}` };
      });
      return { ...receipt, order: ctx.params.order };
    };
    let requests = 0;
    const counting = new Client({ baseUrl: server.url, fetch: (input, init) => (requests++, fetch(input, init)) });
    const worker = new Worker({ client: counting, handlers: { charge }, concurrency: 16, onOutcome: (id, o) => outcomes.set(id, o) });
    const ids = await admitOrders(client, "w1", 300);
    worker.start();
    await eventually("every execution completed", () => outcomes.size === 300);
    await worker.stop();
    for (const id of ids) {
      const rec = await client.get(id);
      assert.equal(rec.status, "completed", id);
      if (rec.status === "completed") assert.deepEqual(rec.outcome.result, { receipt: `r-${id.split("-").pop()}`, order: Number(id.split("-").pop()) });
      assert.equal(ran.get(id), 1, `${id}'s step ran ${ran.get(id)} times`);
    }
    assert.equal(outcomes.size, 300);
    // A claim per round carries the executions and the acknowledgements of
    // the round before; each execution saves one step.
    t.diagnostic(`${requests} requests for 300 executions (${(requests / 300).toFixed(2)} each)`);
    assert.ok(requests <= 2 * 300, `${requests} requests for 300 executions, more than 2 each`);
  });

  test("a renewal that finds the lease lost aborts the delivery, which is neither acknowledged nor released", async () => {
    const events: WorkerEvent[] = [];
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    let abortedWith: unknown;
    const worker = new Worker({
      client,
      handlers: {
        slow: (ctx: DeliveryContext<unknown>) =>
          new Promise((_, reject) => {
            started();
            ctx.signal.addEventListener("abort", () => {
              abortedWith = ctx.signal.reason;
              reject(ctx.signal.reason);
            });
          }),
      },
      leaseDuration: 2000,
      renewInterval: 100,
      onEvent: (e) => events.push(e),
    });
    await client.admit({ executionId: "lost-1", workflowId: "slow" });
    worker.start();
    await running;
    await client.cancel("lost-1", "the customer cancelled");
    await eventually("the delivery was aborted", () => abortedWith !== undefined);
    await worker.stop();
    assert.equal((abortedWith as Error).name, "LeaseLostError");
    assert.ok(events.some((e) => e.kind === "leaseLost" && e.executionId === "lost-1"));
    assert.ok(!events.some((e) => e.kind === "released" && e.executionId === "lost-1"));
    const rec = await client.get("lost-1");
    assert.equal(rec.status, "cancelled");
  });

  test("a delivery that ignores the abort is abandoned after the grace period, and its slot freed", async () => {
    const events: WorkerEvent[] = [];
    const worker = new Worker({
      client,
      handlers: {
        stubborn: () => new Promise(() => {}), // never settles
        charge: async (ctx: DeliveryContext<Order>) => ({ order: ctx.params.order }),
      },
      concurrency: 1,
      leaseDuration: 2000,
      renewInterval: 100,
      abortGracePeriod: 200,
      onEvent: (e) => events.push(e),
    });
    await client.admit({ executionId: "stubborn-1", workflowId: "stubborn" });
    worker.start();
    await eventually("the stubborn delivery runs", () => worker.activeDeliveries === 1);
    await client.cancel("stubborn-1", "stop");
    await eventually("it was abandoned", () => events.some((e) => e.kind === "abandoned"));
    await client.admit<Order>({ executionId: "after-1", workflowId: "charge", params: { order: 1 } });
    await eventually("the freed slot ran the next execution", async () => (await client.get("after-1")).status === "completed");
    await worker.stop();
  });

  test("a rejection releases the lease for a retry; a Failure fails; ExitWithoutReply leaves the lease", async () => {
    const attempts = new Map<string, number>();
    const worker = new Worker({
      client,
      retryAfter: 0,
      leaseDuration: 1000,
      renewInterval: 300,
      handlers: {
        flaky: async (ctx: DeliveryContext<unknown>) => {
          attempts.set(ctx.executionId, ctx.attempt);
          if (ctx.attempt === 1) throw new Error("the gateway timed out");
          return "done";
        },
        declined: async () => {
          throw new Failure("card declined", { name: "PaymentError", code: "DECLINED" });
        },
        vanish: async (ctx: DeliveryContext<unknown>) => {
          if (ctx.attempt === 1) throw new ExitWithoutReply();
          return "second";
        },
      },
    });
    await client.admit({ executionId: "flaky-1", workflowId: "flaky" });
    await client.admit({ executionId: "declined-1", workflowId: "declined" });
    await client.admit({ executionId: "vanish-1", workflowId: "vanish" });
    worker.start();
    await eventually("all three ended", async () => {
      const recs = await Promise.all(["flaky-1", "declined-1", "vanish-1"].map((id) => client.get(id)));
      return recs.every((r) => r.status === "completed" || r.status === "failed");
    });
    await worker.stop();
    const flaky = await client.get("flaky-1");
    assert.equal(flaky.status, "completed");
    assert.equal(attempts.get("flaky-1"), 2);
    const declined = await client.get("declined-1");
    assert.equal(declined.status, "failed");
    if (declined.status === "failed") assert.deepEqual(declined.outcome.error, { name: "PaymentError", message: "card declined", code: "DECLINED" });
    const vanish = await client.get("vanish-1");
    assert.equal(vanish.status, "completed");
    assert.equal(vanish.attempts, 2, "the second delivery came after the first lease expired");
  });

  test("workers lease only the workflows they have handlers for, and the queues they name", async () => {
    assert.throws(() => new Worker({ client, handlers: {} }), RangeError);
    const ran = new Map<string, string>();
    const events: string[] = [];
    const handler = (name: string) => async (ctx: DeliveryContext<unknown>) => {
      ran.set(ctx.executionId, name);
      return name;
    };
    const charges = new Worker({ client, handlers: { "q-charge": handler("charges") }, queues: ["q-payments"], onEvent: (e) => events.push(e.kind) });
    const emails = new Worker({ client, handlers: { "q-email": handler("emails") }, onEvent: (e) => events.push(e.kind) });
    for (let i = 0; i < 20; i++) {
      await client.admit({ executionId: `qc-${i}`, workflowId: "q-charge" });
      await client.admit({ executionId: `qe-${i}`, workflowId: "q-email" });
    }
    await client.admit({ executionId: "q-refund-1", workflowId: "q-charge", queue: "q-payments" });
    assert.equal((await client.get("q-refund-1")).queue, "q-payments");
    charges.start();
    emails.start();
    await eventually("every execution ran", () => ran.size === 41);
    await Promise.all([charges.stop(), emails.stop()]);
    for (let i = 0; i < 20; i++) {
      assert.equal(ran.get(`qc-${i}`), "charges");
      assert.equal(ran.get(`qe-${i}`), "emails");
    }
    assert.equal(ran.get("q-refund-1"), "charges");
    assert.ok(!events.includes("noHandler"), `events: ${events}`);
  });

  test("a server killed with SIGKILL mid-run loses nothing: every execution completes with the value its step saved", async () => {
    const killed = await Server.start();
    try {
      const c = new Client({ baseUrl: killed.url, attempts: 50, retryBaseDelayMs: 20, retryMaxDelayMs: 200 });
      const ran = new Map<string, number>();
      const worker = new Worker({
        client: c,
        concurrency: 8,
        leaseDuration: 2000,
        renewInterval: 500,
        pollInterval: 200,
        handlers: {
          charge: async (ctx: DeliveryContext<Order>) => {
            const r = await ctx.step("charge", () => {
              ran.set(ctx.executionId, (ran.get(ctx.executionId) ?? 0) + 1);
              return { receipt: `r-${ctx.params.order}` };
            });
            return r;
          },
        },
      });
      const ids = await admitOrders(c, "k", 400);
      worker.start();
      for (let kill = 0; kill < 2; kill++) {
        const before = (await c.stats()).byStatus?.completed ?? 0;
        await eventually("some progress before the kill", async () => ((await c.stats()).byStatus?.completed ?? 0) > before + 50 || ((await c.stats()).byStatus?.completed ?? 0) === 400);
        await killed.kill();
        await killed.up();
      }
      await eventually("every execution completed after the kills", async () => ((await c.stats()).byStatus?.completed ?? 0) === 400, 60_000);
      await worker.stop();
      for (const id of ids) {
        const rec = await c.get(id);
        assert.equal(rec.status, "completed", id);
        if (rec.status === "completed") assert.deepEqual(rec.outcome.result, { receipt: `r-${id.split("-").pop()}` });
        // A step may run again only when a delivery died between running it
        // and saving it; the kill can do that to at most the deliveries in
        // flight, and the value saved is the one every run returns.
        assert.ok((ran.get(id) ?? 0) >= 1);
      }
    } finally {
      await killed.stop();
    }
  });
});
