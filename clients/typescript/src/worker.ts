// A worker that runs executions claimed from an execstore server, by the
// rules of the seed's ExecutionDispatcher (@yieldstar/core 0.6.0):
//
// - Up to `concurrency` deliveries run at once; the worker claims as slots
//   free up. Each round is one request: the outcomes of the deliveries that
//   ended since the last round, acknowledged, and the next claim, in one
//   write of the server's log (POST /v1/leases/acknowledge-and-claim). The
//   claim carries each execution's params, context and saved steps, so a
//   delivery reads nothing before it runs. A lease whose execution the
//   answer left out (the server answers the leases alone when it could not
//   read them) has its record read before the delivery, its steps as they
//   are needed; if that read fails, the lease is released.
// - An idle worker's claim waits on the server for work (waitMs =
//   pollInterval): the server answers as soon as an execution is due, so
//   pollInterval bounds a wait the store cuts short, not a polling period.
//   While deliveries run, a round with nothing to claim waits locally for one
//   of them to end, or pollInterval (at least 1 ms: never a busy loop).
// - A round that got no answer, or a 503 (for the request, or for one of its
//   acknowledgements), sends its acknowledgements again in a later round
//   (a repeat of a recorded one answers as a replay), after the server's
//   Retry-After or pollInterval (at least 100 ms), however soon a delivery
//   ends. A round the server refused (another 4xx or a 500) may be about one
//   acknowledgement: each is sent again alone, so that one the server
//   refuses never holds back the others; a refused one is dropped (reported
//   as acknowledgeDropped) and its lease left to expire.
// - Each lease is renewed every `renewInterval`. A renewal that finds the
//   lease lost (another claim took over, or the execution was cancelled)
//   aborts the delivery's AbortSignal, and the worker neither acknowledges
//   nor releases. A delivery still running `abortGracePeriod` after the abort
//   (Infinity: never) is abandoned: its slot is freed, and whatever it
//   returns later is ignored (its writes carry a lost lease, which the
//   server refuses).
// - A handler that returns completes the execution with its value; one that
//   throws a `Failure` fails it; `ctx.suspend()` suspends it (after asking
//   for a wake). A value that is not JSON fails the execution with an
//   `InvalidResult` error, checked when the delivery ends. A handler that
//   throws `ExitWithoutReply` leaves the lease to expire; any other error is
//   a retryable failure: the lease is released, and the execution is
//   delivered again after `retryAfter`.
// - onOutcome and onEvent observe: what they throw is caught, and changes
//   nothing the worker does.
// - stop() claims no more, waits for the running deliveries, and
//   acknowledges what they returned. start() while stop() runs throws;
//   after it, start() runs the worker again.
import { Client, delay, type AckResult, type ClaimAnswer, type Delivery, type ExecutionRecord, type JsonValue, type Lease, type OutcomeRequest, type WorkflowError } from "./client.js";
import { ExecstoreError, LeaseLostError, UnavailableError } from "./errors.js";

/** What a handler gets for one delivery. */
export interface DeliveryContext<P> {
  readonly executionId: string;
  readonly workflowId: string;
  readonly params: P;
  readonly context: Readonly<Record<string, string>>;
  /** This delivery's number, from 1. */
  readonly attempt: number;
  /** The admission's bound on deliveries in a row without an outcome; 0 for none. */
  readonly maxAttempts: number;
  /** The lease as last renewed. */
  readonly lease: Lease;
  /** Aborted (with a LeaseLostError) once a renewal finds the lease lost. */
  readonly signal: AbortSignal;
  /**
   * Runs a step once: a step saved by an earlier delivery returns its saved
   * value without calling fn; otherwise fn's value is saved under key and
   * returned. If another delivery saved the key first, its value wins and is
   * returned. fn's effects outside the store should be idempotent: a delivery
   * that dies after fn and before the save runs it again.
   */
  step<T extends JsonValue>(key: string, fn: (signal: AbortSignal) => Promise<T> | T): Promise<T>;
  /** Asks for a wake at `at` and returns what the handler returns to suspend until then. */
  sleepUntil(at: Date): Promise<Suspended>;
  /** What a handler returns to suspend the execution (it waits for a wake it asked for). */
  suspend(): Suspended;
  /** The client the worker uses. */
  readonly client: Client;
}

const SUSPENDED: unique symbol = Symbol("suspended");
/** The value a handler returns to suspend. */
export type Suspended = typeof SUSPENDED;

/** A handler's failure, recorded as the execution's failed outcome. */
export class Failure extends Error {
  readonly code: string | undefined;
  constructor(message: string, options?: { name?: string; code?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = options?.name ?? "Failure";
    this.code = options?.code;
  }
}

/** Thrown by a handler to end the delivery without a reply: the lease is left to expire. */
export class ExitWithoutReply extends Error {
  constructor(message = "the delivery ends without a reply") {
    super(message);
    this.name = "ExitWithoutReply";
  }
}

/** Runs one workflow's deliveries: its value completes the execution. */
export type Handler<P = JsonValue, R extends JsonValue | void = JsonValue> = (ctx: DeliveryContext<P>) => Promise<R | Suspended> | R | Suspended;

export interface WorkerOptions {
  client: Client;
  /** The handler of each workflow ID this worker runs. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  handlers: Record<string, Handler<any, any>>;
  /** Deliveries run at once. Default 10. */
  concurrency?: number;
  /**
   * Milliseconds an idle claim waits on the server for work, and a busy
   * round locally: a whole number from 1 to 60000. Default 1000.
   */
  pollInterval?: number;
  /** Milliseconds a lease lasts unless renewed. Default 30000. */
  leaseDuration?: number;
  /** Milliseconds between renewals; shorter than leaseDuration. Default leaseDuration / 3. */
  renewInterval?: number;
  /** Milliseconds to wait for a delivery after its lease is lost before abandoning it; Infinity never abandons. Default 1000. */
  abortGracePeriod?: number;
  /** Milliseconds before a released execution is due again. Default 1000. */
  retryAfter?: number;
  /**
   * Queues this worker claims from beside its handlers' own: each
   * execution is in its workflow's queue unless it was admitted to a named
   * one, so by default the worker leases only what it has a handler for.
   * At most 64 queues in all.
   */
  queues?: string[];
  /** Called with each outcome this worker recorded (applied, or replayed after a lost answer). What it throws is reported as observerFailed. */
  onOutcome?: (executionId: string, outcome: OutcomeRequest) => void;
  /** Called with what went wrong and was handled (a failed claim, a lost lease...). What it throws is ignored. Default: nothing. */
  onEvent?: (event: WorkerEvent) => void;
}

/** Something the worker handled: for logs and metrics. */
export type WorkerEvent =
  /** A round (a claim, acknowledgements, or both) failed; see the worker's rules for what is sent again. */
  | { kind: "claimFailed"; error: unknown }
  | { kind: "leaseLost"; executionId: string; token: number }
  | { kind: "abandoned"; executionId: string; token: number }
  | { kind: "released"; executionId: string; error: unknown }
  | { kind: "releaseFailed"; executionId: string; error: unknown }
  | { kind: "exitedWithoutReply"; executionId: string }
  | { kind: "noHandler"; executionId: string; workflowId: string }
  | { kind: "notApplied"; executionId: string }
  /** The handler's value is not JSON: the execution fails with this error. */
  | { kind: "invalidResult"; executionId: string; error: WorkflowError }
  /** A claim's answer left the execution out, and reading it failed: the lease is released. */
  | { kind: "readFailed"; executionId: string; error: unknown }
  /** The store could not take the acknowledgement for now (no answer, or a 503 code): it is sent again. */
  | { kind: "acknowledgeRetried"; executionId: string; error: unknown }
  /** The worker gave the acknowledgement up (the server refused it, or stop() ran out of tries): its lease is left to expire. */
  | { kind: "acknowledgeDropped"; executionId: string; outcome: OutcomeRequest; error: unknown }
  /** onOutcome threw. */
  | { kind: "observerFailed"; error: unknown };

interface PendingAck {
  lease: Lease;
  outcome: OutcomeRequest;
}

/** What a round did: the leases it took, and the wait before the next one when it failed. */
interface Round {
  claimed: number;
  backoffMs: number | undefined;
}

const ABANDONED: unique symbol = Symbol("abandoned");

/** The longest delay setTimeout takes: a longer one fires after 1 ms. */
const TIMEOUT_MAX_MS = 2 ** 31 - 1;

/** The codes of a 503: the store did not take the request, or may not have. Sending an acknowledgement again is safe. */
const UNAVAILABLE_CODES: ReadonlySet<string> = new Set(["STORAGE_FAILED", "CLOSED", "CANCELLED", "NOT_LEADER", "OUTCOME_UNKNOWN"]);

/** The tries stop() makes at the last acknowledgements. */
const STOP_TRIES = 5;

/** A worker: start() runs it, stop() drains it. */
export class Worker {
  private readonly client: Client;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  private readonly handlers: Record<string, Handler<any, any>>;
  private readonly concurrency: number;
  private readonly pollInterval: number;
  private readonly leaseDuration: number;
  private readonly renewInterval: number;
  private readonly abortGracePeriod: number;
  private readonly retryAfter: number;
  private readonly onOutcome: WorkerOptions["onOutcome"];
  private readonly onEvent: (e: WorkerEvent) => void;

  private running = false;
  private stopping: Promise<void> | undefined;
  private loopDone: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private pending: PendingAck[] = [];
  /** Ends the loop's wait for a delivery to end; a delivery's end and stop() call it. */
  private wake: (() => void) | undefined;
  /** Ends the loop's backoff after a failed round; only stop() calls it. */
  private interrupt: (() => void) | undefined;
  private readonly queues: string[];

  constructor(options: WorkerOptions) {
    this.client = options.client;
    this.handlers = options.handlers;
    this.concurrency = options.concurrency ?? 10;
    this.pollInterval = options.pollInterval ?? 1000;
    this.leaseDuration = options.leaseDuration ?? 30_000;
    this.renewInterval = options.renewInterval ?? this.leaseDuration / 3;
    this.abortGracePeriod = options.abortGracePeriod ?? 1000;
    this.retryAfter = options.retryAfter ?? 1000;
    this.onOutcome = options.onOutcome;
    this.onEvent = options.onEvent ?? (() => {});
    this.queues = [...new Set([...Object.keys(this.handlers), ...(options.queues ?? [])])].sort();
    if (this.queues.length === 0 || this.queues.length > 64) throw new RangeError("a worker claims from 1 to 64 queues: its handlers' workflows and options.queues");
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new RangeError("concurrency must be a positive integer");
    if (!Number.isInteger(this.pollInterval) || this.pollInterval < 1 || this.pollInterval > 60_000) {
      throw new RangeError("pollInterval must be a whole number of milliseconds from 1 to 60000 (0 would make a busy worker poll without pause)");
    }
    if (!Number.isInteger(this.leaseDuration) || this.leaseDuration < 1) throw new RangeError("leaseDuration must be a positive whole number of milliseconds");
    if (!(this.renewInterval > 0 && this.renewInterval < this.leaseDuration)) throw new RangeError("renewInterval must be positive and shorter than leaseDuration");
    if (!(this.abortGracePeriod >= 0)) throw new RangeError("abortGracePeriod must not be negative");
    if (!(this.retryAfter >= 0)) throw new RangeError("retryAfter must not be negative");
  }

  /** Deliveries running now. */
  get activeDeliveries(): number {
    return this.inFlight.size;
  }

  /** Starts claiming and running executions; throws while stop() runs (await it first). */
  start(): void {
    if (this.stopping) throw new Error("the worker is stopping: await stop() before starting it again");
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming, waits for the running deliveries (a claim in flight
   * first: it waits at most pollInterval on the server), and acknowledges
   * what they returned. Calls made while it runs answer the same promise.
   */
  stop(): Promise<void> {
    this.stopping ??= this.drain().finally(() => {
      this.stopping = undefined;
    });
    return this.stopping;
  }

  private async drain(): Promise<void> {
    this.running = false;
    this.wake?.();
    this.interrupt?.();
    await this.loopDone;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    for (let tries = 1; this.pending.length > 0 && tries <= STOP_TRIES; tries++) {
      const backoffMs = await this.acknowledge(this.pending.splice(0));
      if (backoffMs !== undefined && this.pending.length > 0 && tries < STOP_TRIES) await delay(Math.min(backoffMs, TIMEOUT_MAX_MS));
    }
    for (const a of this.pending.splice(0)) {
      const error = new Error(`the worker stopped after ${STOP_TRIES} tries to acknowledge ${a.lease.executionId}`);
      this.emit({ kind: "acknowledgeDropped", executionId: a.lease.executionId, outcome: a.outcome, error });
    }
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const acks = this.pending.splice(0);
      const slots = this.concurrency - this.inFlight.size;
      if (acks.length === 0 && slots === 0) {
        await this.nextEvent(undefined);
        continue;
      }
      const round: Round = slots === 0 ? { claimed: 0, backoffMs: await this.acknowledge(acks) } : await this.claim(acks, slots);
      if (round.backoffMs !== undefined) {
        await this.pause(round.backoffMs);
      } else if (round.claimed === 0 && this.inFlight.size > 0 && this.pending.length === 0) {
        await this.nextEvent(this.pollInterval);
      }
    }
  }

  /** One round: acks acknowledged, and up to slots leases claimed and their deliveries started. */
  private async claim(acks: PendingAck[], slots: number): Promise<Round> {
    const idle = acks.length === 0 && this.inFlight.size === 0;
    // A request key per round: the client repeats a round whose answer it
    // lost, and the repeat answers the same leases instead of stranding them.
    const req = { limit: slots, leaseDurationMs: this.leaseDuration, withExecutions: true, waitMs: idle ? this.pollInterval : 0, requestKey: globalThis.crypto.randomUUID(), queues: this.queues };
    let answer: ClaimAnswer & { results: AckResult[] };
    try {
      answer = acks.length === 0 ? { ...(await this.client.claim(req)), results: [] } : await this.client.acknowledgeAndClaim(acks, req);
    } catch (error) {
      return { claimed: 0, backoffMs: await this.failed(acks, error) };
    }
    // The leases first: nothing that follows may lose them.
    answer.leases.forEach((lease, i) => this.startDelivery(lease, answer.executions?.[i]));
    return { claimed: answer.leases.length, backoffMs: this.settle(acks, answer.results) };
  }

  /** Acknowledges acks in one request; answers the wait before the next round when some must be sent again. */
  private async acknowledge(acks: PendingAck[]): Promise<number | undefined> {
    let results: AckResult[];
    try {
      results = await this.client.acknowledgeBatch(acks);
    } catch (error) {
      return this.failed(acks, error);
    }
    return this.settle(acks, results);
  }

  /**
   * Handles a round that failed, and answers the wait before the next. With
   * no answer, or a 503, its acknowledgements are sent again in a later
   * round. An answer that refused the request (another 4xx, or a 500) may be
   * about one acknowledgement: each is sent alone, so that one the server
   * refuses never holds back the others.
   */
  private async failed(acks: PendingAck[], error: unknown): Promise<number> {
    this.emit({ kind: "claimFailed", error });
    if (acks.length > 0) {
      if (!(error instanceof ExecstoreError) || error instanceof UnavailableError) this.pending.unshift(...acks);
      else await Promise.all(acks.map((a) => this.acknowledgeAlone(a)));
    }
    return this.backoff(error);
  }

  private async acknowledgeAlone(a: PendingAck): Promise<void> {
    let result: AckResult;
    try {
      result = { ok: true, record: await this.client.acknowledge(a.lease, a.outcome) };
    } catch (error) {
      if (!(error instanceof ExecstoreError)) {
        this.pending.push(a);
        this.emit({ kind: "acknowledgeRetried", executionId: a.lease.executionId, error });
        return;
      }
      result = { ok: false, error: error.body };
    }
    this.settle([a], [result]);
  }

  /**
   * Reports each acknowledgement's answer. One the store could not take for
   * now (a 503 code) is queued again, and the answer is the wait before the
   * next round; one it refused is dropped.
   */
  private settle(acks: PendingAck[], results: AckResult[]): number | undefined {
    let again = false;
    acks.forEach((a, i) => {
      const r = results[i];
      const executionId = a.lease.executionId;
      if (r === undefined || (!r.ok && UNAVAILABLE_CODES.has(r.error.code))) {
        again = true;
        this.pending.push(a);
        this.emit({ kind: "acknowledgeRetried", executionId, error: r?.error ?? new Error("the answer has no result for this acknowledgement") });
      } else if (r.ok && r.record.applied) {
        this.observe(executionId, a.outcome);
      } else if (r.ok) {
        this.emit({ kind: "notApplied", executionId });
      } else if (r.error.code === "LEASE_LOST") {
        this.emit({ kind: "leaseLost", executionId, token: a.lease.token });
      } else {
        this.emit({ kind: "acknowledgeDropped", executionId, outcome: a.outcome, error: r.error });
      }
    });
    return again ? this.backoff(undefined) : undefined;
  }

  /** The wait after a failure: the server's Retry-After when longer, or pollInterval, at least 100 ms. */
  private backoff(error: unknown): number {
    const ms = Math.max(this.pollInterval, 100);
    if (error instanceof UnavailableError && error.retryAfterMs !== undefined) return Math.max(ms, error.retryAfterMs);
    return ms;
  }

  /** Waits until a delivery ends (or stop), or ms when given. */
  private nextEvent(ms: number | undefined): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const cancel = ms === undefined ? undefined : later(ms, done);
      function done() {
        cancel?.();
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  /** Waits ms after a failure: stop() cuts it short, a delivery's end does not. */
  private pause(ms: number): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const cancel = later(ms, done);
      function done() {
        cancel();
        resolve();
      }
      this.interrupt = () => {
        this.interrupt = undefined;
        done();
      };
    });
  }

  /** Calls onEvent; what it throws changes nothing. */
  private emit(event: WorkerEvent): void {
    try {
      this.onEvent(event);
    } catch {
      // An observer's error is its own: the worker goes on.
    }
  }

  /** Calls onOutcome; what it throws is reported, and changes nothing. */
  private observe(executionId: string, outcome: OutcomeRequest): void {
    try {
      this.onOutcome?.(executionId, outcome);
    } catch (error) {
      this.emit({ kind: "observerFailed", error });
    }
  }

  private startDelivery(lease: Lease, exec: Delivery | undefined): void {
    const task: Promise<void> = this.deliver(lease, exec).finally(() => {
      this.inFlight.delete(task);
      this.wake?.();
    });
    this.inFlight.add(task);
  }

  /** Runs one delivery to its end. */
  private async deliver(lease: Lease, claimed: Delivery | undefined): Promise<void> {
    const renewal = this.renew(lease);
    try {
      const exec = claimed ?? (await this.read(lease, renewal));
      if (!exec) return;
      const handler = this.handlers[exec.workflowId];
      if (!handler) {
        this.emit({ kind: "noHandler", executionId: exec.executionId, workflowId: exec.workflowId });
        await this.release(renewal, lease, new Error(`no handler for workflow ${exec.workflowId}`));
        return;
      }
      let value: unknown;
      try {
        value = await this.abandonAfterAbort(Promise.resolve().then(() => handler(this.context(exec, renewal))), lease, renewal.signal);
      } catch (err) {
        if (renewal.signal.aborted) return; // the lease was lost: nothing to end
        if (err instanceof Failure) {
          this.acknowledgeLater(renewal, lease, { status: "failed", error: errorInfo(err) });
        } else if (err instanceof ExitWithoutReply) {
          this.emit({ kind: "exitedWithoutReply", executionId: lease.executionId });
        } else if (err instanceof LeaseLostError) {
          this.emit({ kind: "leaseLost", executionId: lease.executionId, token: lease.token });
        } else {
          await this.release(renewal, lease, err);
        }
        return;
      }
      if (value === ABANDONED || renewal.signal.aborted) return;
      this.acknowledgeLater(renewal, lease, this.outcomeOf(lease.executionId, value));
    } finally {
      await renewal.stop();
    }
  }

  /**
   * Reads what a claim's answer left out: the record, and the steps as the
   * delivery needs them (moreSteps). If the read fails, the lease is
   * released (not left to expire), and the execution is due again after
   * retryAfter.
   */
  private async read(lease: Lease, renewal: Renewal): Promise<Delivery | undefined> {
    let rec: ExecutionRecord;
    try {
      rec = await this.client.get(lease.executionId);
    } catch (error) {
      this.emit({ kind: "readFailed", executionId: lease.executionId, error });
      await this.release(renewal, lease, error);
      return undefined;
    }
    if (rec.lease?.token !== lease.token) {
      // Another claim took over, or the execution ended (a cancel): nothing to run.
      this.emit({ kind: "leaseLost", executionId: lease.executionId, token: lease.token });
      return undefined;
    }
    return {
      executionId: rec.executionId,
      workflowId: rec.workflowId,
      attempt: lease.token,
      maxAttempts: rec.maxAttempts,
      steps: [],
      moreSteps: true,
      ...(rec.params === undefined ? {} : { params: rec.params }),
      ...(rec.context === undefined ? {} : { context: rec.context }),
      ...(rec.parent === undefined ? {} : { parent: rec.parent }),
    };
  }

  /**
   * The outcome of a handler's value, checked now rather than when a round
   * sends it: a value that is not JSON fails the execution (InvalidResult),
   * and the outcome queued is the value's JSON form, so what the handler
   * changes afterwards is not recorded.
   */
  private outcomeOf(executionId: string, value: unknown): OutcomeRequest {
    if (value === SUSPENDED) return { status: "suspended" };
    if (value === undefined) return { status: "completed" };
    let text: string | undefined;
    let why = "it has no JSON form";
    try {
      text = JSON.stringify(value);
    } catch (err) {
      why = err instanceof Error ? err.message : String(err);
    }
    if (text !== undefined) return { status: "completed", result: JSON.parse(text) as JsonValue };
    const error: WorkflowError = { name: "InvalidResult", code: "RESULT_NOT_JSON", message: `the handler's value is not JSON: ${why}` };
    this.emit({ kind: "invalidResult", executionId, error });
    return { status: "failed", error };
  }

  /** Queues an outcome for the next round's acknowledgements. */
  private acknowledgeLater(renewal: Renewal, lease: Lease, outcome: OutcomeRequest): void {
    renewal.halt();
    this.pending.push({ lease: renewal.current() ?? lease, outcome });
  }

  private async release(renewal: Renewal, lease: Lease, err: unknown): Promise<void> {
    await renewal.stop();
    if (renewal.signal.aborted) return;
    try {
      await this.client.release(lease, this.retryAfter, errorInfo(err));
      this.emit({ kind: "released", executionId: lease.executionId, error: err });
    } catch (error) {
      this.emit({ kind: "releaseFailed", executionId: lease.executionId, error });
    }
  }

  private context<P>(exec: Delivery, renewal: Renewal): DeliveryContext<P> {
    const client = this.client;
    const saved = new Map(exec.steps.map((s) => [s.key, s.value as JsonValue]));
    const lease = () => renewal.current() ?? ({ executionId: exec.executionId, token: exec.attempt, expiresAt: "" } as Lease);
    return {
      executionId: exec.executionId,
      workflowId: exec.workflowId,
      params: exec.params as P,
      context: exec.context ?? {},
      attempt: exec.attempt,
      maxAttempts: exec.maxAttempts,
      get lease() {
        return lease();
      },
      signal: renewal.signal,
      client,
      async step<T extends JsonValue>(key: string, fn: (signal: AbortSignal) => Promise<T> | T): Promise<T> {
        renewal.signal.throwIfAborted();
        if (saved.has(key)) return saved.get(key) as T;
        if (exec.moreSteps) {
          const s = await client.step<T>(exec.executionId, key);
          if (s.saved) {
            saved.set(key, s.value);
            return s.value;
          }
        }
        const v = await fn(renewal.signal);
        renewal.signal.throwIfAborted();
        const r = await client.saveStep(lease(), key, v);
        saved.set(key, r.value);
        return r.value;
      },
      async sleepUntil(at: Date): Promise<Suspended> {
        await client.wake(exec.executionId, at);
        return SUSPENDED;
      },
      suspend: () => SUSPENDED,
    };
  }

  /**
   * Settles with the delivery's value, or ABANDONED once abortGracePeriod
   * has passed since signal aborted; a late value or error is ignored.
   */
  private abandonAfterAbort<T>(delivery: Promise<T>, lease: Lease, signal: AbortSignal): Promise<T | typeof ABANDONED> {
    return new Promise((resolve, reject) => {
      let abandoned = false;
      let cancel: (() => void) | undefined;
      const onAbort = () => {
        cancel = later(this.abortGracePeriod, () => {
          abandoned = true;
          this.emit({ kind: "abandoned", executionId: lease.executionId, token: lease.token });
          resolve(ABANDONED);
        });
      };
      const settle = () => {
        cancel?.();
        signal.removeEventListener("abort", onAbort);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
      delivery.then(
        (v) => {
          settle();
          if (!abandoned) resolve(v);
        },
        (err) => {
          settle();
          if (!abandoned) reject(err);
        },
      );
    });
  }

  /** Renews lease every renewInterval until stopped; aborts the signal once a renewal finds it lost. */
  private renew(lease: Lease): Renewal {
    const controller = new AbortController();
    let current: Lease | undefined = lease;
    let pending: Promise<void> | undefined;
    let stopped = false;
    const timer = setInterval(() => {
      if (stopped || pending || !current) return;
      pending = this.client
        .renew(current, this.leaseDuration)
        .then(
          (renewed) => {
            if (current && !stopped) current = renewed;
          },
          (err) => {
            if (err instanceof ExecstoreError && (err.code === "LEASE_LOST" || err.code === "EXECUTION_NOT_FOUND")) {
              current = undefined;
              clearInterval(timer);
              this.emit({ kind: "leaseLost", executionId: lease.executionId, token: lease.token });
              controller.abort(new LeaseLostError(409, { code: "LEASE_LOST", message: `lease of ${lease.executionId} (token ${lease.token}) lost` }));
            }
            // Otherwise keep trying: the lease stays current until another
            // claim supersedes it, even after it expires.
          },
        )
        .finally(() => {
          pending = undefined;
        });
    }, this.renewInterval);
    return {
      signal: controller.signal,
      current: () => current,
      halt() {
        stopped = true;
        clearInterval(timer);
      },
      async stop() {
        stopped = true;
        clearInterval(timer);
        await pending;
      },
    };
  }
}

interface Renewal {
  signal: AbortSignal;
  current(): Lease | undefined;
  /** Stops renewing without waiting for a renewal in flight. */
  halt(): void;
  /** Stops renewing and waits for a renewal in flight. */
  stop(): Promise<void>;
}

/**
 * Calls fn after ms (never, for Infinity), and answers what cancels it.
 * setTimeout fires after 1 ms for a delay over 2^31-1 ms: a longer one is
 * armed in parts.
 */
function later(ms: number, fn: () => void): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (leftMs: number) => {
    if (leftMs === Infinity) return;
    const partMs = Math.min(leftMs, TIMEOUT_MAX_MS);
    timer = setTimeout(() => (leftMs > partMs ? arm(leftMs - partMs) : fn()), partMs);
  };
  arm(ms);
  return () => clearTimeout(timer);
}

/** The recorded form of an error: name, message, code, and its causes (at most 8). */
export function errorInfo(err: unknown, depth = 0): WorkflowError {
  if (!(err instanceof Error)) return { name: "Error", message: String(err) };
  const info: WorkflowError = { name: err.name || "Error", message: err.message };
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && code !== "") info.code = code;
  if (err.cause !== undefined && depth < 8) info.cause = errorInfo(err.cause, depth + 1);
  return info;
}
