// A worker for the "charge-order" workflow, and a producer that triggers it:
//
//   go run ./cmd/execstore serve &            # the store, on 127.0.0.1:7070
//   cd clients/typescript && npm ci && npm run build
//   node dist/examples/worker.js               # admits 20 orders and runs them
//
// Each order is admitted once (a repeated trigger is a conflict), charged in
// a step that a rerun skips, and completed with its receipt.
import { Client, ExecutionIdConflictError, Failure, Worker, type DeliveryContext } from "../src/index.js";

type Order = { order: number; total: number };
type Receipt = { receipt: string; total: number };

const client = new Client({ baseUrl: process.env.EXECSTORE_URL ?? "http://127.0.0.1:7070", token: process.env.EXECSTORE_TOKEN });

async function chargeOrder(ctx: DeliveryContext<Order>): Promise<Receipt> {
  if (ctx.params.total <= 0) throw new Failure(`order ${ctx.params.order} has nothing to charge`, { code: "EMPTY_ORDER" });
  // Saved once: a rerun after a crash returns the saved receipt without charging again.
  return ctx.step("charge", async (signal) => {
    signal.throwIfAborted();
    return { receipt: `r-${ctx.params.order}`, total: ctx.params.total };
  });
}

const worker = new Worker({ client, handlers: { "charge-order": chargeOrder }, concurrency: 8 });
worker.start();

const ids: string[] = [];
for (let i = 1; i <= 20; i++) {
  const id = `order-${i}`;
  try {
    await client.admit<Order>({ executionId: id, workflowId: "charge-order", params: { order: i, total: i * 10 } });
  } catch (err) {
    if (!(err instanceof ExecutionIdConflictError)) throw err; // admitted by an earlier run: admit-once
  }
  ids.push(id);
}
for (const id of ids) {
  const rec = await client.await<Order>(id, 30_000);
  console.log(id, rec.status, rec.status === "completed" ? JSON.stringify(rec.outcome.result) : "");
}
await worker.stop();
