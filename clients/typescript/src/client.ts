// A typed client for every route of execstore's HTTP API, on the platform's
// fetch. Types come from openapi.yaml (src/schema.d.ts, generated); params,
// results and step values are the caller's own types.
import type { components, paths } from "./schema.js";
import { ExecutionIdConflictError, NetworkError, UnavailableError, errorOf, type ErrorBody } from "./errors.js";

type Schemas = components["schemas"];
type AnswerOf<P extends keyof paths, M extends keyof paths[P], S extends number = 200> =
  paths[P][M] extends { responses: { [K in S]: { content: { "application/json": infer T } } } } ? T : never;
type BodyOf<P extends keyof paths, M extends keyof paths[P]> =
  paths[P][M] extends { requestBody: { content: { "application/json": infer T } } } ? T : never;

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type Lease = Schemas["Lease"];
export type LeaseRef = Schemas["LeaseRef"];
export type Outcome = Schemas["Outcome"];
export type OutcomeRequest = Schemas["OutcomeRequest"];
export type WorkflowError = Schemas["WorkflowError"];
export type ExecutionRecord<P = JsonValue> = Omit<Schemas["LiveRecord"], "params"> & { params?: P } |
  Omit<Schemas["TerminalRecord"], "params"> & { params?: P };
export type Acknowledged = Schemas["Acknowledged"];
export type Delivery<P = JsonValue> = Omit<Schemas["Delivery"], "params"> & { params?: P };
export type Schedule = Schemas["Schedule"];
export type ScheduleBody = Schemas["ScheduleBody"];
export type QueueBody = Schemas["QueueBody"];
export type QueueInfo = Schemas["QueueInfo"];
export type KeyInfo = Schemas["KeyInfo"];
export type Stats = AnswerOf<"/v1/stats", "get">;
export type Cluster = Schemas["Cluster"];

/** One acknowledgement's answer in a batch: the record with `applied`, or its error. */
export type AckResult = { ok: true; record: Acknowledged } | { ok: false; error: ErrorBody };

export interface AdmitRequest<P = JsonValue> {
  /** 1 to 200 bytes; left out, the store chooses one (and admit-once is up to you). */
  executionId?: string;
  workflowId: string;
  params?: P;
  context?: Record<string, string>;
  maxAttempts?: number;
  /** The execution's queue; left out, its workflow's own (which a worker with a handler for the workflow claims from). */
  queue?: string;
  /** 1 (claimed first) to 5 within the queues a claim serves; left out, 3. A child runs at its parent's priority. */
  priority?: number;
  /** RFC 3339: past it, the execution fails with DEADLINE_EXCEEDED unless it has ended. */
  deadline?: string;
  /**
   * 1 to 200 bytes (a customer, a tenant): in a queue with a `keyLimit`, at most that many
   * executions of the key hold a slot at once; the others wait, in the order they became due.
   */
  concurrencyKey?: string;
}

export interface ClaimRequest {
  limit: number;
  leaseDurationMs: number;
  /** Answer each lease's execution as its delivery needs it. */
  withExecutions?: boolean;
  /** When nothing is due, wait up to this long (at most 60000) for something to be. */
  waitMs?: number;
  /**
   * Names the claim (1 to 128 bytes; a new random one per claim, such as
   * crypto.randomUUID()): a repeat answers the same leases, so the client
   * repeats the call after a lost answer too.
   */
  requestKey?: string;
  /** The queues the claim serves (at most 64); left out, every queue. An execution's queue is by default its workflow ID. */
  queues?: string[];
}

export interface ClaimAnswer<P = JsonValue> {
  leases: Lease[];
  executions?: Delivery<P>[];
  /** The store's time after the claim. */
  now: string;
}

export interface ClientOptions {
  /** The server's URL, e.g. http://127.0.0.1:7070. */
  baseUrl: string;
  /** The server's token, when it requires one (serve --token-file). */
  token?: string | undefined;
  /** The fetch to use; the platform's by default. */
  fetch?: typeof fetch | undefined;
  /** Attempts of a request that is safe to repeat, the first included. Default 5. */
  attempts?: number;
  /** The first retry's delay, doubled for each retry after it. Default 100 ms. */
  retryBaseDelayMs?: number;
  /** The longest delay between retries. Default 2000 ms. */
  retryMaxDelayMs?: number;
}

/** Options of one request. */
export interface CallOptions {
  signal?: AbortSignal;
}

/**
 * Whether a request may be sent again when its answer did not come back or
 * said the store was unavailable:
 *  - "always": the request changes nothing, or repeating it answers as the
 *    first did (reads; an acknowledgement or step save, which the server
 *    answers as a replay; a renewal; a cancel; a child start by step key);
 *  - "notLeader": only when the server said no leader took it (NOT_LEADER),
 *    since a repeat could do it twice or lose what the first did (a claim,
 *    whose leases would be stranded; a release; a store commit).
 */
type Retry = "always" | "notLeader";

/** A client of one execstore server. Every method throws an ExecstoreError subclass for an error answer. */
export class Client {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly fetchFn: typeof fetch;
  private readonly attempts: number;
  private readonly baseDelay: number;
  private readonly maxDelay: number;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetchFn = options.fetch ?? globalThis.fetch;
    this.attempts = options.attempts ?? 5;
    this.baseDelay = options.retryBaseDelayMs ?? 100;
    this.maxDelay = options.retryMaxDelayMs ?? 2000;
    if (!Number.isInteger(this.attempts) || this.attempts < 1) throw new RangeError("attempts must be a positive integer");
  }

  // Executions.

  /**
   * Admits an execution once, ever. A repeat of an ID throws
   * ExecutionIdConflictError; after a retry of this very call, its
   * `sameEvent` true means the first attempt was admitted, and admit answers
   * as if this one had been.
   */
  async admit<P = JsonValue>(req: AdmitRequest<P>, opts?: CallOptions): Promise<{ executionId: string }> {
    let sent = 0;
    try {
      return await this.call<{ executionId: string }>("POST", "/v1/executions", req, req.executionId === undefined ? "notLeader" : "always", opts, () => sent++);
    } catch (err) {
      if (err instanceof ExecutionIdConflictError && err.sameEvent && sent > 1 && req.executionId !== undefined) {
        return { executionId: req.executionId };
      }
      throw err;
    }
  }

  get<P = JsonValue>(id: string, opts?: CallOptions): Promise<ExecutionRecord<P>> {
    return this.call("GET", `/v1/executions/${enc(id)}`, undefined, "always", opts);
  }

  /** Waits up to timeoutMs (at most 60000) for the execution to be terminal; AwaitTimeoutError after. */
  await<P = JsonValue>(id: string, timeoutMs = 60_000, opts?: CallOptions): Promise<ExecutionRecord<P>> {
    return this.call("GET", `/v1/executions/${enc(id)}/await?timeout=${timeoutMs}ms`, undefined, "always", opts);
  }

  list(query: Record<string, string | number | undefined> = {}, opts?: CallOptions): Promise<AnswerOf<"/v1/executions", "get">> {
    return this.call("GET", `/v1/executions${queryString(query)}`, undefined, "always", opts);
  }

  /** Archived executions (a server run with --archive), in the order they ended; `cursor` continues, "" on the last page. */
  listArchived(
    query: { workflowId?: string; status?: "completed" | "failed" | "cancelled"; endedAfter?: string; endedBefore?: string; limit?: number; cursor?: string } = {},
    opts?: CallOptions,
  ): Promise<AnswerOf<"/v1/archive", "get">> {
    return this.call("GET", `/v1/archive${queryString(query)}`, undefined, "always", opts);
  }

  wake(id: string, at: Date | string, opts?: CallOptions): Promise<{ status: "requested" | "ignored" }> {
    return this.call("POST", `/v1/executions/${enc(id)}/wakes`, { at: iso(at) }, "always", opts);
  }

  watch(id: string, keys: string[], opts?: CallOptions): Promise<{ status: "requested" | "ignored" }> {
    return this.call("POST", `/v1/executions/${enc(id)}/watches`, { keys }, "always", opts);
  }

  cancel<P = JsonValue>(id: string, reason: string, opts?: CallOptions): Promise<ExecutionRecord<P>> {
    return this.call("POST", `/v1/executions/${enc(id)}/cancel`, { reason }, "always", opts);
  }

  listSteps(id: string, query: { after?: string; limit?: number } = {}, opts?: CallOptions): Promise<AnswerOf<"/v1/executions/{id}/steps", "get">> {
    return this.call("GET", `/v1/executions/${enc(id)}/steps${queryString(query)}`, undefined, "always", opts);
  }

  /** A saved step's value, or `{saved: false}` when the key has none yet. */
  step<T = JsonValue>(id: string, key: string, opts?: CallOptions): Promise<{ saved: true; value: T } | { saved: false }> {
    return this.call("GET", `/v1/executions/${enc(id)}/steps/${enc(key)}`, undefined, "always", opts);
  }

  // Delivery.

  /**
   * Leases up to `limit` due executions. With a `requestKey`, repeated after
   * a lost answer (the repeat answers the same leases); without one, only
   * when no leader took it: a repeat would strand the first one's leases.
   */
  claim<P = JsonValue>(req: ClaimRequest, opts?: CallOptions): Promise<ClaimAnswer<P>> {
    return this.call("POST", "/v1/claims", req, req.requestKey === undefined ? "notLeader" : "always", opts);
  }

  renew(lease: LeaseRef, leaseDurationMs: number, opts?: CallOptions): Promise<Lease> {
    return this.call("POST", "/v1/leases/renew", { lease: leaseRef(lease), leaseDurationMs }, "always", opts);
  }

  release(lease: LeaseRef, retryAfterMs: number, error?: WorkflowError, opts?: CallOptions): Promise<{ status: "released" }> {
    return this.call("POST", "/v1/leases/release", { lease: leaseRef(lease), retryAfterMs, ...(error ? { error } : {}) }, "notLeader", opts);
  }

  /** Records how a delivery ended. A repeat after a lost answer answers `applied` and `replayed`. */
  acknowledge(lease: LeaseRef, outcome: OutcomeRequest, opts?: CallOptions): Promise<Acknowledged> {
    return this.call("POST", "/v1/leases/acknowledge", { lease: leaseRef(lease), outcome }, "always", opts);
  }

  async acknowledgeBatch(acks: { lease: LeaseRef; outcome: OutcomeRequest }[], opts?: CallOptions): Promise<AckResult[]> {
    const body = { acknowledgements: acks.map((a) => ({ lease: leaseRef(a.lease), outcome: a.outcome })) };
    const out = await this.call<{ results: (Acknowledged | ErrorBody)[] }>("POST", "/v1/leases/acknowledge-batch", body, "always", opts);
    return out.results.map(ackResult);
  }

  /** Acknowledges deliveries and claims more in one write of the log; repeated after a lost answer only with a `requestKey`, as claim is. */
  async acknowledgeAndClaim<P = JsonValue>(acks: { lease: LeaseRef; outcome: OutcomeRequest }[], claim: ClaimRequest, opts?: CallOptions):
    Promise<ClaimAnswer<P> & { results: AckResult[] }> {
    const body = { acknowledgements: acks.map((a) => ({ lease: leaseRef(a.lease), outcome: a.outcome })), ...claim };
    const retry = claim.requestKey === undefined ? "notLeader" : "always";
    const out = await this.call<ClaimAnswer<P> & { results: (Acknowledged | ErrorBody)[] }>("POST", "/v1/leases/acknowledge-and-claim", body, retry, opts);
    return { ...out, results: out.results.map(ackResult) };
  }

  /**
   * Saves a step's value under the lease; the first value saved under a key
   * is kept. `applied` says whether the kept value is this one (`replayed`:
   * an earlier request saved the same).
   */
  saveStep<T = JsonValue>(lease: LeaseRef, key: string, value: T, opts?: CallOptions): Promise<{ applied: boolean; replayed?: boolean; value: T }> {
    return this.call("POST", "/v1/leases/steps", { lease: leaseRef(lease), key, value }, "always", opts);
  }

  /** Starts a child execution, once per step key (a repeat answers the same child). */
  start<P = JsonValue>(lease: LeaseRef, stepKey: string, workflowId: string, params?: P, opts?: CallOptions): Promise<{ executionId: string }> {
    return this.call("POST", "/v1/leases/start", { lease: leaseRef(lease), stepKey, workflowId, ...(params === undefined ? {} : { params }) }, "always", opts);
  }

  checkOutcome(outcome: OutcomeRequest, opts?: CallOptions): Promise<{ outcome: Outcome }> {
    return this.call("POST", "/v1/outcomes/check", { outcome }, "always", opts);
  }

  // The key-value store.

  commit(writes: BodyOf<"/v1/store/commit", "post">["writes"], opts?: CallOptions): Promise<AnswerOf<"/v1/store/commit", "post">> {
    return this.call("POST", "/v1/store/commit", { writes }, "notLeader", opts);
  }

  read<T = JsonValue>(key: string, opts?: CallOptions): Promise<{ value: T }> {
    return this.call("GET", `/v1/store/${enc(key)}`, undefined, "always", opts);
  }

  // Schedules.

  putSchedule(id: string, schedule: ScheduleBody, opts?: CallOptions): Promise<Schedule> {
    return this.call("PUT", `/v1/schedules/${enc(id)}`, schedule, "always", opts);
  }

  getSchedule(id: string, opts?: CallOptions): Promise<Schedule> {
    return this.call("GET", `/v1/schedules/${enc(id)}`, undefined, "always", opts);
  }

  deleteSchedule(id: string, opts?: CallOptions): Promise<AnswerOf<"/v1/schedules/{id}", "delete">> {
    return this.call("DELETE", `/v1/schedules/${enc(id)}`, undefined, "notLeader", opts);
  }

  listSchedules(opts?: CallOptions): Promise<AnswerOf<"/v1/schedules", "get">> {
    return this.call("GET", "/v1/schedules", undefined, "always", opts);
  }

  // Queues.

  /** Sets a queue's concurrency limit, rate limit, key limit and pause; an identical put writes nothing, so it is repeated after a lost answer. */
  putQueue(name: string, settings: QueueBody, opts?: CallOptions): Promise<QueueInfo> {
    return this.call("PUT", `/v1/queues/${enc(name)}`, settings, "always", opts);
  }

  /** A queue's settings and counts; any name is a queue, empty or not. */
  getQueue(name: string, opts?: CallOptions): Promise<QueueInfo> {
    return this.call("GET", `/v1/queues/${enc(name)}`, undefined, "always", opts);
  }

  /** Removes a queue's settings (no limit, not paused); a queue without any answers the same. */
  deleteQueue(name: string, opts?: CallOptions): Promise<AnswerOf<"/v1/queues/{name}", "delete">> {
    return this.call("DELETE", `/v1/queues/${enc(name)}`, undefined, "always", opts);
  }

  /** A queue's concurrency keys, the most waiting first, at most `limit` (1 to 1000; default 100). */
  queueKeys(name: string, limit?: number, opts?: CallOptions): Promise<KeyInfo[]> {
    const q = limit === undefined ? "" : `?limit=${limit}`;
    return this.call<AnswerOf<"/v1/queues/{name}/keys", "get">>("GET", `/v1/queues/${enc(name)}/keys${q}`, undefined, "always", opts).then((a) => a.keys);
  }

  /** The queues with settings or live executions, in name order, a page of 1000 after `after`. */
  listQueues(after?: string, opts?: CallOptions): Promise<AnswerOf<"/v1/queues", "get">> {
    return this.call("GET", "/v1/queues" + (after === undefined ? "" : `?after=${enc(after)}`), undefined, "always", opts);
  }

  // Operations.

  changes(query: { after?: number; limit?: number; wait?: string } = {}, opts?: CallOptions): Promise<AnswerOf<"/v1/changes", "get">> {
    return this.call("GET", `/v1/changes${queryString(query)}`, undefined, "always", opts);
  }

  stats(opts?: CallOptions): Promise<Stats> {
    return this.call("GET", "/v1/stats", undefined, "always", opts);
  }

  health(opts?: CallOptions): Promise<AnswerOf<"/healthz", "get">> {
    return this.call("GET", "/healthz", undefined, "always", opts);
  }

  cluster(opts?: CallOptions): Promise<Cluster> {
    return this.call("GET", "/v1/cluster", undefined, "always", opts);
  }

  /**
   * Sends one request, repeating it as `retry` allows after a network error
   * or a 503, with exponential backoff (or the server's Retry-After). attempt
   * is called before each attempt.
   */
  private async call<T>(method: string, path: string, body: unknown, retry: Retry, opts?: CallOptions, attempt?: () => void): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    for (let n = 1; ; n++) {
      attempt?.();
      let res: Response;
      let text: string;
      try {
        res = await this.fetchFn(this.baseUrl + path, { method, headers, body: payload ?? null, signal: opts?.signal ?? null });
        text = await res.text();
      } catch (e) {
        if (opts?.signal?.aborted) throw e;
        // No answer: the server may be down, or restarting, or may have done
        // it and lost the answer.
        const err = new NetworkError(`${method} ${path}: ${(e as Error).message}`, { cause: e });
        if (retry !== "always" || n >= this.attempts) throw err;
        await delay(this.backoff(n), opts?.signal);
        continue;
      }
      if (res.ok) return JSON.parse(text) as T;
      const err = errorOf(res.status, parseError(text, res.status), retryAfter(res.headers.get("retry-after")));
      const mayRepeat = err instanceof UnavailableError && (retry === "always" || err.code === "NOT_LEADER");
      if (!mayRepeat || n >= this.attempts) throw err;
      await delay((err as UnavailableError).retryAfterMs ?? this.backoff(n), opts?.signal);
    }
  }

  /** The delay before retry n: exponential, capped, with jitter. */
  private backoff(n: number): number {
    return Math.min(this.maxDelay, this.baseDelay * 2 ** (n - 1)) * (0.5 + Math.random() / 2);
  }
}

function ackResult(r: Acknowledged | ErrorBody): AckResult {
  return "code" in r ? { ok: false, error: r } : { ok: true, record: r };
}

/** A lease as the server reads it back: the execution and the token name it. */
function leaseRef(l: LeaseRef): LeaseRef {
  return { executionId: l.executionId, token: l.token };
}

function enc(s: string): string {
  return encodeURIComponent(s);
}

function iso(t: Date | string): string {
  return typeof t === "string" ? t : t.toISOString();
}

function queryString(q: Record<string, string | number | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== "") p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
}

function parseError(text: string, status: number): ErrorBody {
  try {
    const b = JSON.parse(text) as ErrorBody;
    if (b && typeof b.code === "string") return b;
  } catch {
    // not JSON: a proxy's page, or a cut answer
  }
  return { code: status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT", message: `HTTP ${status}: ${text.slice(0, 200)}` } as ErrorBody;
}

function retryAfter(h: string | null): number | undefined {
  if (!h) return undefined;
  const s = Number(h);
  return Number.isFinite(s) && s >= 0 ? s * 1000 : undefined;
}

/** Resolves after ms, or rejects when signal aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
