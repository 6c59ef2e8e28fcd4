// The Worker when things go wrong: an outcome the server refuses, a batch
// refused whole, a per-item NOT_LEADER, observers that throw, a claim
// answered without its executions, a 503 with Retry-After, a start during a
// stop, a grace period too long for a timer. A proxy in the test process
// (test/proxy.ts) makes the answers the binary does not give on demand.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client, ExitWithoutReply, Worker, type DeliveryContext, type JsonValue, type WorkerEvent } from "../src/index.js";
import { acknowledged, isAcknowledgement, Proxy, type Answer, type Exchange, type Forward } from "./proxy.js";
import { Server } from "./server.js";

/** Polls until check holds, failing after patience: never an expectation about speed. */
async function eventually(what: string, check: () => Promise<boolean> | boolean, patience = 15_000): Promise<void> {
  const deadline = Date.now() + patience;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${patience} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A promise and the function that resolves it. */
function signal<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * A proxy's handler that takes each execution's first acknowledgement out of
 * its batch and answers NOT_LEADER in its place: nothing was done with it.
 */
function notLeaderOnce(): (req: Exchange, forward: Forward) => Promise<Answer> {
  const failedOnce = new Set<string>();
  return async (req, forward) => {
    if (!isAcknowledgement(req) || req.path === "/v1/leases/acknowledge") return forward();
    const acks = req.body.acknowledgements as { lease: { executionId: string } }[];
    const refuse = acks.map((a) => !failedOnce.has(a.lease.executionId));
    acks.forEach((a) => failedOnce.add(a.lease.executionId));
    const ans = await forward({ ...req.body, acknowledgements: acks.filter((_, i) => !refuse[i]) });
    if (ans.status !== 200) return ans;
    const kept = [...ans.body.results];
    const results = refuse.map((r) => (r ? { code: "NOT_LEADER", message: "no leader is known" } : kept.shift()));
    return { status: 200, body: { ...ans.body, results } };
  };
}

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

describe("Worker failures", () => {
  let server: Server;
  let client: Client;
  before(async () => {
    server = await Server.start(["--nosync"]);
    client = new Client({ baseUrl: server.url, retryBaseDelayMs: 20 });
  });
  after(() => server.stop());

  test("a handler's value that is not JSON fails its execution and holds back no other acknowledgement", async () => {
    const events: WorkerEvent[] = [];
    const worker = new Worker({
      client,
      concurrency: 4,
      handlers: {
        bigint: () => ({ amount: 10n }) as unknown as JsonValue,
        ok: async (ctx: DeliveryContext<unknown>) => ctx.executionId,
      },
      onEvent: (e) => events.push(e),
    });
    await client.admit({ executionId: "nonjson-1", workflowId: "bigint" });
    const ids = ["json-1", "json-2", "json-3"];
    for (const id of ids) await client.admit({ executionId: id, workflowId: "ok" });
    worker.start();
    await eventually("every execution ended", async () => (await Promise.all([...ids, "nonjson-1"].map((id) => client.get(id)))).every((r) => TERMINAL.has(r.status)));
    await worker.stop();
    const bad = await client.get("nonjson-1");
    assert.equal(bad.status, "failed");
    if (bad.status === "failed") {
      assert.equal(bad.outcome.error?.name, "InvalidResult");
      assert.equal(bad.outcome.error?.code, "RESULT_NOT_JSON");
      assert.match(bad.outcome.error?.message ?? "", /not JSON/);
    }
    for (const id of ids) assert.equal((await client.get(id)).status, "completed", id);
    assert.ok(events.some((e) => e.kind === "invalidResult" && e.executionId === "nonjson-1"));
  });

  test("a batch refused whole is sent again one acknowledgement at a time, and only the refused one is dropped", async () => {
    const refusedOnce = signal();
    const proxy = await Proxy.start(server.url, (req, forward) => {
      if (acknowledged(req).includes("refused-1")) {
        refusedOnce.resolve();
        return { status: 400, body: { code: "INVALID_ARGUMENT", message: "acknowledgements[0].outcome: refused" } };
      }
      return forward();
    });
    try {
      const events: WorkerEvent[] = [];
      const worker = new Worker({
        client: new Client({ baseUrl: proxy.url }),
        concurrency: 4,
        pollInterval: 50,
        handlers: {
          refused: () => "refused",
          // The others end after the refusal, so that their acknowledgements
          // go in a batch with the refused one.
          fine: async () => (await refusedOnce.promise, "fine"),
        },
        onEvent: (e) => events.push(e),
      });
      await client.admit({ executionId: "refused-1", workflowId: "refused" });
      const ids = ["fine-1", "fine-2", "fine-3"];
      for (const id of ids) await client.admit({ executionId: id, workflowId: "fine" });
      worker.start();
      await eventually("the others completed", async () => (await Promise.all(ids.map((id) => client.get(id)))).every((r) => r.status === "completed"));
      await eventually("the refused one was dropped", () => events.some((e) => e.kind === "acknowledgeDropped" && e.executionId === "refused-1"));
      await worker.stop();
      const refused = await client.get("refused-1");
      assert.equal(refused.status, "admitted", "its lease is left to expire");
      assert.ok(!events.some((e) => e.kind === "acknowledgeDropped" && e.executionId !== "refused-1"));
    } finally {
      await proxy.close();
    }
  });

  test("an acknowledgement a batch answers NOT_LEADER is sent again, not dropped", async () => {
    const proxy = await Proxy.start(server.url, notLeaderOnce());
    try {
      const events: WorkerEvent[] = [];
      const outcomes: string[] = [];
      const worker = new Worker({
        client: new Client({ baseUrl: proxy.url }),
        leaseDuration: 2000,
        renewInterval: 500,
        pollInterval: 50,
        handlers: { ok: () => "done" },
        onEvent: (e) => events.push(e),
        onOutcome: (id) => outcomes.push(id),
      });
      await client.admit({ executionId: "nl-1", workflowId: "ok" });
      await client.admit({ executionId: "nl-2", workflowId: "ok" });
      worker.start();
      await eventually("both completed", () => outcomes.includes("nl-1") && outcomes.includes("nl-2"));
      await worker.stop();
      for (const id of ["nl-1", "nl-2"]) {
        const rec = await client.get(id);
        assert.equal(rec.status, "completed");
        assert.equal(rec.attempts, 1, `${id} was delivered once: its acknowledgement was sent again`);
        assert.ok(events.some((e) => e.kind === "acknowledgeRetried" && e.executionId === id));
      }
      assert.ok(!events.some((e) => e.kind === "releaseFailed" || e.kind === "acknowledgeDropped"));
    } finally {
      await proxy.close();
    }
  });

  test("an acknowledgement stop() sends that a batch answers NOT_LEADER is sent again, not dropped", async () => {
    const proxy = await Proxy.start(server.url, notLeaderOnce());
    try {
      const events: WorkerEvent[] = [];
      const started = signal();
      const finish = signal();
      const worker = new Worker({
        client: new Client({ baseUrl: proxy.url }),
        pollInterval: 50,
        handlers: {
          hold: async () => {
            started.resolve();
            await finish.promise;
            return "held";
          },
        },
        onEvent: (e) => events.push(e),
      });
      await client.admit({ executionId: "nl-stop-1", workflowId: "hold" });
      worker.start();
      await started.promise;
      const stopping = worker.stop(); // the loop ends: stop() acknowledges what the delivery returns
      finish.resolve();
      await stopping;
      const rec = await client.get("nl-stop-1");
      assert.equal(rec.status, "completed");
      assert.equal(rec.attempts, 1);
      assert.ok(events.some((e) => e.kind === "acknowledgeRetried" && e.executionId === "nl-stop-1"));
      assert.ok(!events.some((e) => e.kind === "releaseFailed" || e.kind === "acknowledgeDropped"));
    } finally {
      await proxy.close();
    }
  });

  test("observers that throw lose no lease and stop nothing", async () => {
    const worker = new Worker({
      client,
      concurrency: 1,
      leaseDuration: 1000,
      renewInterval: 300,
      handlers: { ok: async (ctx: DeliveryContext<unknown>) => ctx.executionId },
      onOutcome: () => {
        throw new Error("an observer's bug");
      },
      onEvent: () => {
        throw new Error("another observer's bug");
      },
    });
    const ids = ["obs-1", "obs-2", "obs-3", "obs-4", "obs-5"];
    for (const id of ids) await client.admit({ executionId: id, workflowId: "ok" });
    worker.start();
    await eventually("every execution completed", async () => (await Promise.all(ids.map((id) => client.get(id)))).every((r) => r.status === "completed"));
    await worker.stop();
    for (const id of ids) assert.equal((await client.get(id)).attempts, 1, `${id} was delivered once: no claimed lease was dropped`);
  });

  test("an onEvent that throws when a lost lease is found or a delivery abandoned crashes nothing, and the slot is freed", async () => {
    let calls = 0;
    const worker = new Worker({
      client,
      concurrency: 1,
      leaseDuration: 2000,
      renewInterval: 100,
      abortGracePeriod: 50,
      handlers: {
        stubborn: () => new Promise(() => {}), // never settles
        ok: () => "after",
      },
      onEvent: () => {
        calls++;
        throw new Error("an observer's bug");
      },
    });
    await client.admit({ executionId: "obs-stubborn-1", workflowId: "stubborn" });
    worker.start();
    await eventually("the stubborn delivery runs", () => worker.activeDeliveries === 1);
    await client.cancel("obs-stubborn-1", "stop");
    await client.admit({ executionId: "obs-after-1", workflowId: "ok" });
    await eventually("the freed slot ran the next execution", async () => (await client.get("obs-after-1")).status === "completed");
    await worker.stop();
    assert.ok(calls >= 2, "leaseLost and abandoned were reported");
  });

  test("pollInterval must be a whole number of milliseconds from 1 to 60000", () => {
    const make = (pollInterval: number) => new Worker({ client, handlers: { w: () => null }, pollInterval });
    for (const bad of [0, -1, 0.5, 60_001, Number.NaN]) assert.throws(() => make(bad), RangeError, String(bad));
    for (const good of [1, 60_000]) make(good);
  });

  test("a claim answered without its executions reads the record, and the lazily read steps, before the delivery", async () => {
    const proxy = await Proxy.start(server.url, async (req, forward) => {
      const ans = await forward();
      if (req.path === "/v1/claims" || req.path === "/v1/leases/acknowledge-and-claim") delete ans.body?.executions;
      return ans;
    });
    try {
      const worker = new Worker({
        client: new Client({ baseUrl: proxy.url }),
        retryAfter: 0,
        pollInterval: 50,
        handlers: {
          read: async (ctx: DeliveryContext<{ order: number }>) => {
            const first = await ctx.step("first", () => ctx.attempt);
            if (ctx.attempt === 1) throw new Error("once more"); // released: attempt 2 finds the step saved
            return { order: ctx.params.order, tenant: ctx.context.tenant ?? null, first, attempt: ctx.attempt };
          },
        },
      });
      await client.admit({ executionId: "noexec-1", workflowId: "read", params: { order: 7 }, context: { tenant: "shop" } });
      worker.start();
      await eventually("it completed", async () => (await client.get("noexec-1")).status === "completed");
      await worker.stop();
      const rec = await client.get("noexec-1");
      if (rec.status === "completed") assert.deepEqual(rec.outcome.result, { order: 7, tenant: "shop", first: 1, attempt: 2 });
    } finally {
      await proxy.close();
    }
  });

  test("a claim answered without its executions whose record cannot be read releases the lease", async () => {
    let reads = 0;
    const proxy = await Proxy.start(server.url, async (req, forward) => {
      if (req.method === "GET" && req.path === "/v1/executions/noread-1" && reads++ === 0) {
        return { status: 500, body: { code: "INTERNAL", message: "a read failed" } };
      }
      const ans = await forward();
      if (req.path === "/v1/claims" || req.path === "/v1/leases/acknowledge-and-claim") delete ans.body?.executions;
      return ans;
    });
    try {
      const events: WorkerEvent[] = [];
      const worker = new Worker({
        client: new Client({ baseUrl: proxy.url }),
        retryAfter: 0,
        pollInterval: 50,
        handlers: { ok: (ctx: DeliveryContext<unknown>) => ctx.attempt },
        onEvent: (e) => events.push(e),
      });
      await client.admit({ executionId: "noread-1", workflowId: "ok" });
      worker.start();
      await eventually("it completed", async () => (await client.get("noread-1")).status === "completed");
      await worker.stop();
      const rec = await client.get("noread-1");
      if (rec.status === "completed") assert.equal(rec.outcome.result, 2, "the second delivery came after the release, not after the lease expired");
      assert.ok(events.some((e) => e.kind === "readFailed" && e.executionId === "noread-1"));
      assert.ok(events.some((e) => e.kind === "released" && e.executionId === "noread-1"));
    } finally {
      await proxy.close();
    }
  });

  test("a round that fails waits out its Retry-After even when a delivery ends meanwhile", async () => {
    let failNext = false;
    let failedAt = 0;
    const nextAfterFailure = signal<number>();
    const proxy = await Proxy.start(server.url, (req, forward) => {
      if (req.method !== "POST" || !(req.path === "/v1/claims" || req.path.startsWith("/v1/leases/acknowledge"))) return forward();
      if (failNext) {
        failNext = false;
        failedAt = performance.now();
        return { status: 503, headers: { "retry-after": "1" }, body: { code: "CLOSED", message: "the store is closed" } };
      }
      if (failedAt > 0) nextAfterFailure.resolve(performance.now());
      return forward();
    });
    try {
      const started = signal();
      const finish = signal();
      const failed = signal();
      const worker = new Worker({
        client: new Client({ baseUrl: proxy.url, attempts: 1 }),
        concurrency: 2,
        pollInterval: 50,
        handlers: {
          hold: async () => {
            started.resolve();
            await finish.promise;
            return "held";
          },
        },
        onEvent: (e) => {
          if (e.kind === "claimFailed") failed.resolve();
        },
      });
      await client.admit({ executionId: "backoff-1", workflowId: "hold" });
      worker.start();
      await started.promise;
      failNext = true;
      await failed.promise;
      finish.resolve(); // the delivery ends, and wakes the loop
      const next = await nextAfterFailure.promise;
      await worker.stop();
      assert.ok(next - failedAt >= 990, `the next round came ${Math.round(next - failedAt)} ms after a 503 with Retry-After: 1`);
      assert.equal((await client.get("backoff-1")).status, "completed");
    } finally {
      await proxy.close();
    }
  });

  test("start() while stop() drains throws, and start() after it runs the worker again", async () => {
    const started = signal();
    const finish = signal();
    const worker = new Worker({
      client,
      handlers: {
        hold: async () => {
          started.resolve();
          await finish.promise;
          return "held";
        },
        ok: () => "again",
      },
    });
    await client.admit({ executionId: "restart-1", workflowId: "hold" });
    worker.start();
    await started.promise;
    const stopping = worker.stop();
    assert.throws(() => worker.start(), /stopping/);
    finish.resolve();
    await stopping;
    assert.equal((await client.get("restart-1")).status, "completed");
    await client.admit({ executionId: "restart-2", workflowId: "ok" });
    worker.start();
    await eventually("the restarted worker ran it", async () => (await client.get("restart-2")).status === "completed");
    await worker.stop();
  });

  for (const grace of [Infinity, 2 ** 31]) {
    test(`an abortGracePeriod of ${grace} ms never abandons a delivery too soon`, async () => {
      const events: WorkerEvent[] = [];
      const aborted = signal();
      const finish = signal();
      const id = `grace-${grace}`;
      const worker = new Worker({
        client,
        leaseDuration: 2000,
        renewInterval: 100,
        abortGracePeriod: grace,
        handlers: {
          late: async (ctx: DeliveryContext<unknown>) => {
            ctx.signal.addEventListener("abort", () => aborted.resolve());
            await finish.promise;
            throw new ExitWithoutReply();
          },
        },
        onEvent: (e) => events.push(e),
      });
      await client.admit({ executionId: id, workflowId: "late" });
      worker.start();
      await eventually("the delivery runs", () => worker.activeDeliveries === 1);
      await client.cancel(id, "stop");
      await aborted.promise;
      // Nothing to await here: the check is that nothing happens. A timer
      // armed with too long a delay fires after 1 ms.
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(!events.some((e) => e.kind === "abandoned"), "abandoned at once");
      assert.equal(worker.activeDeliveries, 1);
      finish.resolve();
      await worker.stop();
      assert.equal(worker.activeDeliveries, 0);
    });
  }
});
