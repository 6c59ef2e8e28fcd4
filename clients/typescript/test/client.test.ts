// The client against the real binary: typed answers, typed errors, and the
// answers a retry gets.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client, ExecutionIdConflictError, InvalidArgumentError, LeaseLostError, NotFoundError, UnauthorizedError } from "../src/index.js";
import { Proxy } from "./proxy.js";
import { Server } from "./server.js";

describe("Client", () => {
  let server: Server;
  let client: Client;
  before(async () => {
    server = await Server.start();
    client = new Client({ baseUrl: server.url });
  });
  after(() => server.stop());

  test("admits once: a repeat is a conflict that says whether it is the same event", async () => {
    type Order = { order: number; lines: { sku: string; qty: number }[] };
    const params: Order = { order: 42, lines: [{ sku: "a-1", qty: 2 }] };
    assert.deepEqual(await client.admit<Order>({ executionId: "order-42", workflowId: "charge", params }), { executionId: "order-42" });
    await assert.rejects(client.admit({ executionId: "order-42", workflowId: "charge", params }), (err) => {
      assert.ok(err instanceof ExecutionIdConflictError);
      assert.equal(err.sameEvent, true);
      assert.equal(err.status, 409);
      return true;
    });
    await assert.rejects(client.admit({ executionId: "order-42", workflowId: "charge", params: { order: 43, lines: [] } }), (err) => {
      assert.ok(err instanceof ExecutionIdConflictError && err.sameEvent === false);
      return true;
    });
    const rec = await client.get<Order>("order-42");
    assert.equal(rec.status, "admitted");
    assert.deepEqual(rec.params, params);
  });

  test("a claim with a request key whose answer is lost is repeated and answers the same leases", async () => {
    await client.admit({ executionId: "lost-answer-1", workflowId: "w" });
    await client.admit({ executionId: "lost-answer-2", workflowId: "w" });
    // The proxy hands the first claim to the server, then answers as if its
    // answer were lost on the way back.
    const forwarded: unknown[] = [];
    const proxy = await Proxy.start(server.url, async (req, forward) => {
      if (req.path !== "/v1/claims") return forward();
      const answer = await forward();
      forwarded.push(answer.body);
      if (forwarded.length === 1) return { status: 503, body: { code: "OUTCOME_UNKNOWN", message: "the answer was lost" } };
      return answer;
    });
    try {
      const remote = new Client({ baseUrl: proxy.url, retryBaseDelayMs: 1 });
      const got = await remote.claim({ limit: 2, leaseDurationMs: 30_000, requestKey: "client-test/round-1" });
      assert.equal(forwarded.length, 2, "the claim was sent twice");
      assert.deepEqual(got.leases, (forwarded[0] as { leases: unknown[] }).leases, "the repeat answered the leases of the first");
      assert.equal(got.leases.length, 2);
      for (const l of got.leases) assert.equal((await client.get(l.executionId)).lease?.token, l.token);
      // Without a key, a lost answer is not repeated: the error is the caller's.
      await client.admit({ executionId: "lost-answer-3", workflowId: "w" });
      forwarded.length = 0;
      await assert.rejects(remote.claim({ limit: 1, leaseDurationMs: 30_000 }), (err) => err instanceof Error && /lost/.test(err.message));
      assert.equal(forwarded.length, 1);
    } finally {
      await proxy.close();
    }
  });

  test("a queue's settings bound its claims, and a paused queue gives nothing", async () => {
    for (let i = 0; i < 3; i++) await client.admit({ executionId: `lim-${i}`, workflowId: "limited" });
    const q = await client.putQueue("limited", { concurrency: 1 });
    assert.deepEqual(q, { name: "limited", concurrency: 1, paused: false, rate: 0, ratePeriodMs: 0, live: 3, due: 3, leased: 0, expired: 0, granted: 0, keyLimit: 0, parked: 0 });
    const first = await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["limited"] });
    assert.equal(first.leases.length, 1);
    assert.equal((await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["limited"] })).leases.length, 0);
    await client.putQueue("limited", { concurrency: 5, paused: true });
    assert.equal((await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["limited"] })).leases.length, 0);
    assert.ok((await client.listQueues()).queues.some((x) => x.name === "limited" && x.paused && x.leased === 1));
    await client.deleteQueue("limited");
    assert.equal((await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["limited"] })).leases.length, 2);
    await assert.rejects(client.putQueue("limited", { concurrency: -1 }), InvalidArgumentError);
  });

  test("a queue's rate limit bounds the leases granted in its window", async () => {
    for (let i = 0; i < 3; i++) await client.admit({ executionId: `rate-${i}`, workflowId: "rated" });
    const q = await client.putQueue("rated", { rate: 2, ratePeriodMs: 60_000 });
    assert.equal(q.rate, 2);
    assert.equal((await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["rated"] })).leases.length, 2);
    assert.equal((await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["rated"] })).leases.length, 0);
    assert.equal((await client.getQueue("rated")).granted, 2);
    await assert.rejects(client.putQueue("rated", { rate: 2 }), InvalidArgumentError);
  });

  test("a queue's key limit runs one customer's executions one at a time", async () => {
    await client.putQueue("keyed", { keyLimit: 1, keyMode: "live" });
    for (let i = 0; i < 3; i++) await client.admit({ executionId: `cust-a-${i}`, workflowId: "keyed", concurrencyKey: "customer-a" });
    await client.admit({ executionId: "cust-b-0", workflowId: "keyed", concurrencyKey: "customer-b" });
    const first = await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["keyed"] });
    assert.deepEqual(first.leases.map((l) => l.executionId), ["cust-a-0", "cust-b-0"]);
    assert.equal((await client.get("cust-a-1")).concurrencyKey, "customer-a");
    assert.deepEqual(await client.queueKeys("keyed"), [
      { key: "customer-a", holding: 1, ready: 0, parked: 2 },
      { key: "customer-b", holding: 1, ready: 0, parked: 0 },
    ]);
    assert.equal((await client.getQueue("keyed")).parked, 2);
    await client.acknowledge(first.leases[0]!, { status: "completed" });
    const next = await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["keyed"] });
    assert.deepEqual(next.leases.map((l) => l.executionId), ["cust-a-1"]);
    await assert.rejects(client.admit({ executionId: "cust-bad", workflowId: "keyed", concurrencyKey: "" }), (err) => err instanceof InvalidArgumentError && err.code === "INVALID_EXECUTION_EVENT");
  });

  test("a claim takes higher priorities first", async () => {
    await client.admit({ executionId: "rank-low", workflowId: "ranked", priority: 5 });
    await client.admit({ executionId: "rank-default", workflowId: "ranked" });
    await client.admit({ executionId: "rank-high", workflowId: "ranked", priority: 1 });
    const claimed = await client.claim({ limit: 10, leaseDurationMs: 30_000, queues: ["ranked"] });
    assert.deepEqual(claimed.leases.map((l) => l.executionId), ["rank-high", "rank-default", "rank-low"]);
    assert.equal((await client.get("rank-high")).priority, 1);
    await assert.rejects(client.admit({ executionId: "rank-bad", workflowId: "ranked", priority: 6 }), (err) => err instanceof InvalidArgumentError && err.code === "INVALID_EXECUTION_EVENT");
  });

  test("an execution past its deadline fails", async () => {
    await client.admit({ executionId: "timed-1", workflowId: "timed", deadline: "2000-01-01T00:00:00Z" });
    const rec = await client.await("timed-1", 10_000);
    assert.equal(rec.status, "failed");
    assert.equal(rec.outcome?.error?.code, "DEADLINE_EXCEEDED");
  });

  test("refuses what it cannot keep with a typed error", async () => {
    await assert.rejects(client.admit({ executionId: "", workflowId: "w" }), InvalidArgumentError);
    await assert.rejects(client.admit({ executionId: "..", workflowId: "w" }), InvalidArgumentError);
    await assert.rejects(client.get("nobody"), NotFoundError);
  });

  test("a delivery: claim with executions, steps, replayed answers, a lost lease", async () => {
    await client.admit({ executionId: "ship-1", workflowId: "ship", params: { to: "Lyon" }, context: { tenant: "shop" } });
    const claimed = await client.claim({ limit: 10, leaseDurationMs: 30_000, withExecutions: true });
    const i = claimed.leases.findIndex((l) => l.executionId === "ship-1");
    assert.ok(i >= 0, "ship-1 was claimed");
    const lease = claimed.leases[i]!;
    const exec = claimed.executions![i]!;
    assert.deepEqual(exec.params, { to: "Lyon" });
    assert.deepEqual(exec.context, { tenant: "shop" });
    assert.deepEqual(exec.steps, []);

    assert.deepEqual(await client.step("ship-1", "label"), { saved: false });
    assert.deepEqual(await client.saveStep(lease, "label", { id: "L-1" }), { applied: true, value: { id: "L-1" } });
    assert.deepEqual(await client.saveStep(lease, "label", { id: "L-1" }), { applied: true, replayed: true, value: { id: "L-1" } });
    assert.deepEqual(await client.saveStep(lease, "label", { id: "L-2" }), { applied: false, value: { id: "L-1" } });
    assert.deepEqual(await client.step("ship-1", "label"), { saved: true, value: { id: "L-1" } });

    const first = await client.acknowledge(lease, { status: "completed", result: { shipped: true } });
    assert.equal(first.applied, true);
    assert.equal(first.replayed, undefined);
    const again = await client.acknowledge(lease, { status: "completed", result: { shipped: true } });
    assert.equal(again.applied, true);
    assert.equal(again.replayed, true);
    const other = await client.acknowledge(lease, { status: "completed", result: { shipped: false } });
    assert.equal(other.applied, false);
    if (other.status === "completed") assert.deepEqual(other.outcome.result, { shipped: true });
    await assert.rejects(client.renew(lease, 1000), LeaseLostError);
  });

  test("an execution past the retention of a server with --archive is read from the archive and listed there", async () => {
    const archiving = await Server.start(["--nosync", "--retention", "1ms", "--archive"]);
    try {
      const c = new Client({ baseUrl: archiving.url });
      await c.admit({ executionId: "settle-1", workflowId: "settle" });
      const { leases } = await c.claim({ limit: 1, leaseDurationMs: 60_000 });
      assert.equal(leases.length, 1);
      await c.acknowledge(leases[0]!, { status: "failed", error: { name: "Error", message: "bank closed" } });
      // The server's retention check runs every second.
      const deadline = Date.now() + 10_000;
      let page = await c.listArchived({ workflowId: "settle", status: "failed" });
      while (page.records.length === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        page = await c.listArchived({ workflowId: "settle", status: "failed" });
      }
      assert.deepEqual(page.records.map((r) => [r.executionId, r.archived]), [["settle-1", true]]);
      assert.equal(page.cursor, "");
      const rec = await c.get("settle-1");
      assert.equal(rec.archived, true);
      assert.equal(rec.status, "failed");
      assert.deepEqual((await c.listArchived({ status: "completed" })).records, []);
      await assert.rejects(c.admit({ executionId: "settle-1", workflowId: "settle" }), ExecutionIdConflictError);
    } finally {
      await archiving.stop();
    }
  });

  test("a server with a token refuses a client without it", async () => {
    // The binary reads its token from its environment, which it inherits.
    process.env.EXECSTORE_TOKEN = "a-token-of-sixteen-bytes-or-more";
    const withToken = await Server.start();
    delete process.env.EXECSTORE_TOKEN;
    try {
      await assert.rejects(new Client({ baseUrl: withToken.url }).stats(), UnauthorizedError);
      const stats = await new Client({ baseUrl: withToken.url, token: "a-token-of-sixteen-bytes-or-more" }).stats();
      assert.equal(typeof stats, "object");
    } finally {
      await withToken.stop();
    }
  });
});
