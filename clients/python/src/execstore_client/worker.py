"""A worker that runs executions claimed from an execstore server, by the
rules of the seed's ExecutionDispatcher (@yieldstar/core 0.6.0), as the
TypeScript client's Worker does:

- Up to ``concurrency`` deliveries run at once, each on a thread of its own;
  the worker claims as slots free up. A round is one request: the outcomes of
  the deliveries that ended, acknowledged, and the next claim, which carries
  each execution's params, context and saved steps.
- An idle worker's claim waits on the server for work, up to
  ``poll_interval``; while deliveries run, a round with nothing to claim waits
  for one of them to end, or ``poll_interval``.
- Each lease is renewed every ``renew_interval``. A renewal that finds the
  lease lost sets the delivery's ``lease_lost`` event, and the worker neither
  acknowledges nor releases; a delivery still running ``abort_grace_period``
  after that is abandoned and its slot freed (Python cannot stop a thread:
  whatever it returns later is ignored, and its writes carry a lost lease).
- A handler's return value completes the execution; raising ``Failure``
  fails it; returning ``SUSPENDED`` (``ctx.suspend()``) suspends it; raising
  ``ExitWithoutReply`` leaves the lease to expire; any other exception
  releases the lease, and the execution is due again after ``retry_after``.
- ``stop()`` claims no more, waits for the running deliveries, and
  acknowledges what they returned.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Callable, Dict, List, Optional

from .client import JSON, Client, Lease, Outcome
from .errors import ExecstoreError, LeaseLostError, UnavailableError

SUSPENDED = object()
"""What a handler returns to suspend the execution until a wake it asked for."""


class Failure(Exception):
    """A handler's failure, recorded as the execution's failed outcome."""

    def __init__(self, message: str, name: str = "Failure", code: Optional[str] = None):
        super().__init__(message)
        self.name = name
        self.code = code


class ExitWithoutReply(Exception):
    """Raised by a handler to end the delivery without a reply: the lease is left to expire."""


def error_info(err: BaseException, depth: int = 0) -> Dict[str, Any]:
    """The recorded form of an error: name, message, code, and its causes (at most 8)."""
    info: Dict[str, Any] = {"name": getattr(err, "name", None) or type(err).__name__, "message": str(err)}
    code = getattr(err, "code", None)
    if isinstance(code, str) and code:
        info["code"] = code
    cause = err.__cause__ or err.__context__
    if cause is not None and depth < 8:
        info["cause"] = error_info(cause, depth + 1)
    return info


class Delivery:
    """What a handler gets for one delivery."""

    def __init__(self, worker: "Worker", lease: Lease, execution: Dict[str, Any]):
        self._worker = worker
        self._lease = lease
        self._lock = threading.Lock()
        self._saved = {s["key"]: s["value"] for s in execution.get("steps", [])}
        self._more_steps = execution.get("moreSteps", False)
        self.execution_id: str = execution["executionId"]
        self.workflow_id: str = execution["workflowId"]
        self.params: JSON = execution.get("params")
        self.context: Dict[str, str] = execution.get("context", {})
        self.attempt: int = execution["attempt"]
        self.max_attempts: int = execution["maxAttempts"]
        self.lease_lost = threading.Event()
        """Set once a renewal finds the lease lost: stop, and return nothing."""
        self.client = worker.client

    @property
    def lease(self) -> Lease:
        with self._lock:
            return self._lease

    def _renewed(self, lease: Lease) -> None:
        with self._lock:
            self._lease = lease

    def step(self, key: str, fn: Callable[[], JSON]) -> JSON:
        """Runs a step once: a saved value is returned without calling fn;
        otherwise fn's value is saved under key and returned (or the value
        another delivery saved first). fn's effects outside the store should be
        idempotent: a delivery that dies after fn and before the save runs it
        again."""
        if self.lease_lost.is_set():
            raise LeaseLostError(409, {"code": "LEASE_LOST", "message": f"lease of {self.execution_id} lost"})
        if key in self._saved:
            return self._saved[key]
        if self._more_steps:
            found = self.client.step(self.execution_id, key)
            if found["saved"]:
                self._saved[key] = found["value"]
                return found["value"]
        value = fn()
        kept = self.client.save_step(self.lease, key, value)["value"]
        self._saved[key] = kept
        return kept

    def suspend(self) -> object:
        """What a handler returns to suspend the execution."""
        return SUSPENDED

    def sleep_until(self, at: datetime) -> object:
        """Asks for a wake at ``at`` and returns what the handler returns to suspend until then."""
        self.client.wake(self.execution_id, at)
        return SUSPENDED


Handler = Callable[[Delivery], Any]


class Worker:
    """A worker: start() runs it in a thread of its own, stop() drains it."""

    def __init__(self, client: Client, handlers: Dict[str, Handler], concurrency: int = 10,
                 poll_interval: float = 1.0, lease_duration: float = 30.0, renew_interval: Optional[float] = None,
                 abort_grace_period: float = 1.0, retry_after: float = 1.0,
                 on_outcome: Optional[Callable[[str, Outcome], None]] = None,
                 on_event: Optional[Callable[[str, Dict[str, Any]], None]] = None):
        renew_interval = lease_duration / 3 if renew_interval is None else renew_interval
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not 0 <= poll_interval <= 60:
            raise ValueError("poll_interval must be from 0 to 60 seconds")
        if lease_duration < 0.001:
            raise ValueError("lease_duration must be at least a millisecond")
        if not 0 < renew_interval < lease_duration:
            raise ValueError("renew_interval must be positive and shorter than lease_duration")
        if abort_grace_period < 0 or retry_after < 0:
            raise ValueError("abort_grace_period and retry_after must not be negative")
        self.client = client
        self.handlers = handlers
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.lease_ms = int(lease_duration * 1000)
        self.renew_interval = renew_interval
        self.abort_grace_period = abort_grace_period
        self.retry_after_ms = int(retry_after * 1000)
        self.on_outcome = on_outcome
        self.on_event = on_event or (lambda kind, detail: None)
        self._cond = threading.Condition()
        self._running = False
        self._in_flight: Dict[str, threading.Thread] = {}  # by "id#token"
        self._pending: List[Dict[str, Any]] = []
        self._loop: Optional[threading.Thread] = None

    @property
    def active_deliveries(self) -> int:
        with self._cond:
            return len(self._in_flight)

    def start(self) -> None:
        with self._cond:
            if self._running:
                return
            self._running = True
        self._loop = threading.Thread(target=self._run, name="execstore-worker", daemon=True)
        self._loop.start()

    def stop(self) -> None:
        """Stops claiming, waits for the running deliveries (a claim in flight
        first: it waits at most poll_interval on the server), and acknowledges
        what they returned."""
        with self._cond:
            self._running = False
            self._cond.notify_all()
        if self._loop:
            self._loop.join()
        with self._cond:
            while self._in_flight:
                self._cond.wait()
            acks, self._pending = self._pending, []
        for _ in range(5):
            if not acks:
                break
            try:
                self._settled(acks, self.client.acknowledge_batch(acks))
                acks = []
            except (ExecstoreError, OSError, Exception) as err:  # noqa: BLE001 - reported, then retried
                self.on_event("claimFailed", {"error": err})
                threading.Event().wait(max(self.poll_interval, 0.1))

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._running:
                    return
                acks, self._pending = self._pending, []
                slots = self.concurrency - len(self._in_flight)
                if not acks and slots == 0:
                    self._cond.wait()
                    continue
                idle = not acks and not self._in_flight
            wait_ms = int(self.poll_interval * 1000) if idle else 0
            try:
                if slots == 0:
                    self._settled(acks, self.client.acknowledge_batch(acks))
                    answer: Dict[str, Any] = {"leases": []}
                elif not acks:
                    answer = self.client.claim(slots, self.lease_ms, True, wait_ms)
                else:
                    answer = self.client.acknowledge_and_claim(acks, slots, self.lease_ms, True, wait_ms)
                    self._settled(acks, answer["results"])
            except Exception as err:  # noqa: BLE001 - a round failed: reported, and retried
                # Acknowledgements are safe to send again (a repeat answers as a
                # replay); a claim whose answer was lost left its leases to expire.
                with self._cond:
                    self._pending[:0] = acks
                    self.on_event("claimFailed", {"error": err})
                    delay = err.retry_after if isinstance(err, UnavailableError) and err.retry_after else max(self.poll_interval, 0.1)
                    self._cond.wait(delay)
                continue
            executions = answer.get("executions")
            for i, lease in enumerate(answer["leases"]):
                self._deliver(lease, executions[i] if executions else None)
            with self._cond:
                if not answer["leases"] and self._in_flight and not self._pending and self._running:
                    self._cond.wait(self.poll_interval)

    def _settled(self, acks: List[Dict[str, Any]], results: List[Dict[str, Any]]) -> None:
        for ack, res in zip(acks, results):
            eid = ack["lease"]["executionId"]
            if "code" in res:
                self.on_event("leaseLost" if res["code"] == "LEASE_LOST" else "acknowledgeFailed", {"executionId": eid, "error": res})
            elif res.get("applied"):
                if self.on_outcome:
                    self.on_outcome(eid, ack["outcome"])
            else:
                self.on_event("notApplied", {"executionId": eid})

    def _deliver(self, lease: Lease, execution: Optional[Dict[str, Any]]) -> None:
        key = f"{lease['executionId']}#{lease['token']}"
        thread = threading.Thread(target=self._run_delivery, args=(key, lease, execution), name=f"execstore-{key}", daemon=True)
        with self._cond:
            self._in_flight[key] = thread
        thread.start()

    def _free(self, key: str) -> bool:
        """Frees the delivery's slot; False if it was abandoned (freed already)."""
        with self._cond:
            freed = self._in_flight.pop(key, None) is not None
            self._cond.notify_all()
            return freed

    def _run_delivery(self, key: str, lease: Lease, execution: Optional[Dict[str, Any]]) -> None:
        if execution is None:  # the server could not read it with the claim: let the lease expire
            self.on_event("exitedWithoutReply", {"executionId": lease["executionId"]})
            self._free(key)
            return
        ctx = Delivery(self, lease, execution)
        handler = self.handlers.get(ctx.workflow_id)
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(key, ctx, stop), daemon=True)
        renewer.start()
        outcome: Optional[Outcome] = None
        release: Optional[BaseException] = None
        try:
            if handler is None:
                self.on_event("noHandler", {"executionId": ctx.execution_id, "workflowId": ctx.workflow_id})
                release = LookupError(f"no handler for workflow {ctx.workflow_id}")
            else:
                value = handler(ctx)
                if value is SUSPENDED:
                    outcome = {"status": "suspended"}
                elif value is None:
                    outcome = {"status": "completed"}
                else:
                    outcome = {"status": "completed", "result": value}
        except Failure as err:
            outcome = {"status": "failed", "error": error_info(err)}
        except ExitWithoutReply:
            self.on_event("exitedWithoutReply", {"executionId": ctx.execution_id})
        except LeaseLostError:
            self.on_event("leaseLost", {"executionId": ctx.execution_id, "token": lease["token"]})
        except Exception as err:  # noqa: BLE001 - a retryable failure: the lease is released
            release = err
        finally:
            stop.set()
            renewer.join()
        if ctx.lease_lost.is_set():
            self._free(key)
            return
        if release is not None:
            try:
                self.client.release(ctx.lease, self.retry_after_ms, error_info(release))
                self.on_event("released", {"executionId": ctx.execution_id, "error": release})
            except Exception as err:  # noqa: BLE001 - the lease will expire instead
                self.on_event("releaseFailed", {"executionId": ctx.execution_id, "error": err})
        with self._cond:
            if key not in self._in_flight:
                return  # abandoned: its outcome is ignored
            if outcome is not None:
                self._pending.append({"lease": ctx.lease, "outcome": outcome})
            del self._in_flight[key]
            self._cond.notify_all()

    def _renew(self, key: str, ctx: Delivery, stop: threading.Event) -> None:
        while not stop.wait(self.renew_interval):
            try:
                ctx._renewed(self.client.renew(ctx.lease, self.lease_ms))
            except ExecstoreError as err:
                if err.code in ("LEASE_LOST", "EXECUTION_NOT_FOUND"):
                    ctx.lease_lost.set()
                    self.on_event("leaseLost", {"executionId": ctx.execution_id, "token": ctx.lease["token"]})
                    # Abandon the delivery if it does not end within the grace period.
                    if not stop.wait(self.abort_grace_period):
                        if self._free(key):
                            self.on_event("abandoned", {"executionId": ctx.execution_id})
                    return
            except Exception:  # noqa: BLE001 - keep trying: the lease stays current until superseded
                pass
