// The TypeScript Worker under the bench command's workload (g): runs the
// "bench" workflow (one step, then complete) until it has completed N
// executions, then prints {completed, requests, cpuSeconds} as JSON.
//
//   node bench/http-worker.mjs URL N CONCURRENCY
import { Client, Worker } from "../dist/src/index.js";

const [url, n, concurrency] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4] ?? 64)];
let requests = 0;
const client = new Client({ baseUrl: url, fetch: (input, init) => (requests++, fetch(input, init)) });
let completed = 0;
let done;
const finished = new Promise((resolve) => (done = resolve));
const worker = new Worker({
  client,
  concurrency,
  pollInterval: 100,
  handlers: {
    bench: (ctx) => ctx.step("charge", () => ({ receipt: `r-${ctx.params.n}` })),
  },
  onOutcome: () => {
    if (++completed === n) done();
  },
});
const cpu0 = process.cpuUsage();
worker.start();
await finished;
await worker.stop();
const cpu = process.cpuUsage(cpu0);
process.stdout.write(JSON.stringify({ completed, requests, cpuSeconds: (cpu.user + cpu.system) / 1e6 }) + "\n");
