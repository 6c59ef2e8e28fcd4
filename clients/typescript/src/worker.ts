// A worker that runs executions claimed from an execstore server, by the
// rules of the seed's ExecutionDispatcher (@yieldstar/core 0.6.0):
//
// - Up to `concurrency` deliveries run at once; the worker claims as slots
//   free up. Each round is one request: the outcomes of the deliveries that
//   ended since the last round, acknowledged, and the next claim, in one
//   write of the server's log (POST /v1/leases/acknowledge-and-claim). The
//   claim carries each execution's params, context and saved steps, so a
//   delivery reads nothing before it runs.
// - An idle worker's claim waits on the server for work (waitMs =
//   pollInterval): the server answers as soon as an execution is due, so
//   pollInterval bounds a wait the store cuts short, not a polling period.
//   While deliveries run, a round with nothing to claim waits locally for one
//   of them to end, or pollInterval.
// - Each lease is renewed every `renewInterval`. A renewal that finds the
//   lease lost (another claim took over, or the execution was cancelled)
//   aborts the delivery's AbortSignal, and the worker neither acknowledges
//   nor releases. A delivery still running `abortGracePeriod` after the abort
//   is abandoned: its slot is freed, and whatever it returns later is
//   ignored (its writes carry a lost lease, which the server refuses).
// - A handler that returns completes the execution with its value; one that
//   throws a `Failure` fails it; `ctx.suspend()` suspends it (after asking
//   for a wake). A handler that throws `ExitWithoutReply` leaves the lease to
//   expire; any other error is a retryable failure: the lease is released,
//   and the execution is delivered again after `retryAfter`.
// - stop() claims no more, waits for the running deliveries, and
//   acknowledges what they returned.
import { Client, delay, type Delivery, type JsonValue, type Lease, type OutcomeRequest, type WorkflowError } from "./client.js";
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
  /** Milliseconds an idle claim waits on the server for work (at most 60000), and a busy round locally. Default 1000. */
  pollInterval?: number;
  /** Milliseconds a lease lasts unless renewed. Default 30000. */
  leaseDuration?: number;
  /** Milliseconds between renewals; shorter than leaseDuration. Default leaseDuration / 3. */
  renewInterval?: number;
  /** Milliseconds to wait for a delivery after its lease is lost before abandoning it. Default 1000. */
  abortGracePeriod?: number;
  /** Milliseconds before a released execution is due again. Default 1000. */
  retryAfter?: number;
  /** Called with each outcome this worker recorded (applied, or replayed after a lost answer). */
  onOutcome?: (executionId: string, outcome: OutcomeRequest) => void;
  /** Called with what went wrong and was handled (a failed claim, a lost lease...). Default: nothing. */
  onEvent?: (event: WorkerEvent) => void;
}

/** Something the worker handled: for logs and metrics. */
export type WorkerEvent =
  | { kind: "claimFailed"; error: unknown }
  | { kind: "leaseLost"; executionId: string; token: number }
  | { kind: "abandoned"; executionId: string; token: number }
  | { kind: "released"; executionId: string; error: unknown }
  | { kind: "releaseFailed"; executionId: string; error: unknown }
  | { kind: "exitedWithoutReply"; executionId: string }
  | { kind: "noHandler"; executionId: string; workflowId: string }
  | { kind: "notApplied"; executionId: string };

interface PendingAck {
  lease: Lease;
  outcome: OutcomeRequest;
}

const ABANDONED: unique symbol = Symbol("abandoned");

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
  private loopDone: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private pending: PendingAck[] = [];
  private wake: (() => void) | undefined;

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
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new RangeError("concurrency must be a positive integer");
    if (!(this.pollInterval >= 0 && this.pollInterval <= 60_000)) throw new RangeError("pollInterval must be from 0 to 60000");
    if (!Number.isInteger(this.leaseDuration) || this.leaseDuration < 1) throw new RangeError("leaseDuration must be a positive whole number of milliseconds");
    if (!(this.renewInterval > 0 && this.renewInterval < this.leaseDuration)) throw new RangeError("renewInterval must be positive and shorter than leaseDuration");
    if (!(this.abortGracePeriod >= 0)) throw new RangeError("abortGracePeriod must not be negative");
    if (!(this.retryAfter >= 0)) throw new RangeError("retryAfter must not be negative");
  }

  /** Deliveries running now. */
  get activeDeliveries(): number {
    return this.inFlight.size;
  }

  /** Starts claiming and running executions. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming, waits for the running deliveries (a claim in flight
   * first: it waits at most pollInterval on the server), and acknowledges
   * what they returned.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loopDone;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    for (let tries = 0; this.pending.length > 0 && tries < 5; tries++) {
      const acks = this.pending.splice(0);
      try {
        this.settled(acks, await this.client.acknowledgeBatch(acks));
      } catch (error) {
        this.onEvent({ kind: "claimFailed", error });
        this.pending.unshift(...acks);
        await delay(this.pollInterval);
      }
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
      const idle = acks.length === 0 && this.inFlight.size === 0;
      const claim = { limit: Math.max(slots, 1), leaseDurationMs: this.leaseDuration, withExecutions: true, waitMs: idle ? this.pollInterval : 0 };
      let leases: Lease[] = [];
      let executions: Delivery[] | undefined;
      try {
        if (slots === 0) {
          this.settled(acks, await this.client.acknowledgeBatch(acks));
        } else if (acks.length === 0) {
          ({ leases, executions } = await this.client.claim(claim));
        } else {
          const ans = await this.client.acknowledgeAndClaim(acks, claim);
          this.settled(acks, ans.results);
          ({ leases, executions } = ans);
        }
      } catch (error) {
        // Acknowledgements are safe to send again (a repeat of one that was
        // recorded answers as a replay); a claim whose answer was lost left
        // its leases to expire.
        this.pending.unshift(...acks);
        this.onEvent({ kind: "claimFailed", error });
        await this.nextEvent(this.backoff(error));
        continue;
      }
      leases.forEach((lease, i) => {
        const task: Promise<void> = this.deliver(lease, executions?.[i]).finally(() => {
          this.inFlight.delete(task);
          this.wake?.();
        });
        this.inFlight.add(task);
      });
      if (leases.length === 0 && this.inFlight.size > 0 && this.pending.length === 0) {
        await this.nextEvent(this.pollInterval);
      }
    }
  }

  /** Waits until a delivery ends (or stop), or ms when given. */
  private nextEvent(ms: number | undefined): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const t = ms === undefined ? undefined : setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  private backoff(error: unknown): number {
    if (error instanceof UnavailableError && error.retryAfterMs !== undefined) return error.retryAfterMs;
    return Math.max(this.pollInterval, 100);
  }

  /** Reports each acknowledgement's answer. */
  private settled(acks: PendingAck[], results: Awaited<ReturnType<Client["acknowledgeBatch"]>>): void {
    results.forEach((r, i) => {
      const a = acks[i]!;
      if (r.ok && r.record.applied) this.onOutcome?.(a.lease.executionId, a.outcome);
      else if (r.ok) this.onEvent({ kind: "notApplied", executionId: a.lease.executionId });
      else if (r.error.code === "LEASE_LOST") this.onEvent({ kind: "leaseLost", executionId: a.lease.executionId, token: a.lease.token });
      else this.onEvent({ kind: "releaseFailed", executionId: a.lease.executionId, error: r.error });
    });
  }

  /** Runs one delivery to its end. */
  private async deliver(lease: Lease, exec: Delivery | undefined): Promise<void> {
    const renewal = this.renew(lease);
    try {
      if (!exec) {
        // The server could not read the execution with its claim (it was
        // closing): leave the lease to expire.
        this.onEvent({ kind: "exitedWithoutReply", executionId: lease.executionId });
        return;
      }
      const handler = this.handlers[exec.workflowId];
      if (!handler) {
        this.onEvent({ kind: "noHandler", executionId: exec.executionId, workflowId: exec.workflowId });
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
          this.onEvent({ kind: "exitedWithoutReply", executionId: lease.executionId });
        } else if (err instanceof LeaseLostError) {
          this.onEvent({ kind: "leaseLost", executionId: lease.executionId, token: lease.token });
        } else {
          await this.release(renewal, lease, err);
        }
        return;
      }
      if (value === ABANDONED || renewal.signal.aborted) return;
      const outcome: OutcomeRequest = value === SUSPENDED
        ? { status: "suspended" }
        : value === undefined ? { status: "completed" } : { status: "completed", result: value as JsonValue };
      this.acknowledgeLater(renewal, lease, outcome);
    } finally {
      await renewal.stop();
    }
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
      this.onEvent({ kind: "released", executionId: lease.executionId, error: err });
    } catch (error) {
      this.onEvent({ kind: "releaseFailed", executionId: lease.executionId, error });
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
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => {
        timer = setTimeout(() => {
          abandoned = true;
          this.onEvent({ kind: "abandoned", executionId: lease.executionId, token: lease.token });
          resolve(ABANDONED);
        }, this.abortGracePeriod);
      };
      const settle = () => {
        clearTimeout(timer);
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
              this.onEvent({ kind: "leaseLost", executionId: lease.executionId, token: lease.token });
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

/** The recorded form of an error: name, message, code, and its causes (at most 8). */
export function errorInfo(err: unknown, depth = 0): WorkflowError {
  if (!(err instanceof Error)) return { name: "Error", message: String(err) };
  const info: WorkflowError = { name: err.name || "Error", message: err.message };
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && code !== "") info.code = code;
  if (err.cause !== undefined && depth < 8) info.cause = errorInfo(err.cause, depth + 1);
  return info;
}
