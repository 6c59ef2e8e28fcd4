"""A worker that runs executions claimed from an execstore server, by the
rules of the seed's ExecutionDispatcher (@yieldstar/core 0.6.0), as the
TypeScript client's Worker does:

- Up to ``concurrency`` deliveries run at once, each on a thread of its own;
  the worker claims as slots free up. A round is one request: the outcomes of
  the deliveries that ended, acknowledged, and the next claim, which carries
  each execution's params, context and saved steps. A lease whose execution
  the claim's answer left out is delivered after a read of the record (its
  steps are then read one by one, as a step needs them); if that read fails,
  the lease is released.
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
  (any BaseException) releases the lease, and the execution is due again
  after ``retry_after``. A value that is not JSON fails the execution
  (``RESULT_NOT_JSON``): it is checked when the outcome is queued, so it
  never reaches a round.
- An acknowledgement is sent again only when the store could not take it: a
  network error, a 503, or its own answer in the batch is one of the 503's
  codes (``UNAVAILABLE_CODES``). A batch refused as a whole (any other error
  answer) is split: each acknowledgement is sent alone, and one refused alone
  is dropped and reported (``acknowledgeDropped``): its lease expires and the
  execution is delivered again. One bad acknowledgement never holds back the
  others.
- After a failed round the worker waits ``max(poll_interval, 0.1)`` seconds,
  or the 503's Retry-After, before the next: a delivery that ends meanwhile
  does not cut the wait short.
- ``on_outcome`` and ``on_event`` are observers: what they raise is logged
  and ignored, and a round's leases are taken before they are called.
- ``stop()`` claims no more, waits for the running deliveries, and
  acknowledges what they returned. ``start()`` while ``stop()`` runs raises
  RuntimeError; after ``stop()`` returns, ``start()`` runs the worker again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from datetime import datetime
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .client import JSON, Client, Lease, Outcome
from .errors import UNAVAILABLE_CODES, ExecstoreError, LeaseLostError, UnavailableError

SUSPENDED = object()
"""What a handler returns to suspend the execution until a wake it asked for."""

BATCH_MAX = 10_000
"""The server's bound on acknowledgements in one call, and on a claim's limit."""

FAILURE_WAIT_MIN = 0.1
"""Seconds: the least wait after a failed round, whatever poll_interval is."""

STOP_ATTEMPTS = 5
"""Failed tries stop() makes to acknowledge what the deliveries returned."""

_log = logging.getLogger("execstore_client.worker")

Ack = Dict[str, Any]  # {"lease": Lease, "outcome": Outcome}


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
    info: Dict[str, Any] = {"name": str(getattr(err, "name", None) or type(err).__name__), "message": str(err)}
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

_STOPPED, _RUNNING, _STOPPING = "stopped", "running", "stopping"


def _refused(err: BaseException) -> bool:
    """Whether err is the server refusing the request (an error answer other
    than a 503): sending the same request again would be refused again."""
    return isinstance(err, ExecstoreError) and not isinstance(err, UnavailableError)


class Worker:
    """A worker: start() runs it in a thread of its own, stop() drains it."""

    def __init__(self, client: Client, handlers: Dict[str, Handler], concurrency: int = 10,
                 poll_interval: float = 1.0, lease_duration: float = 30.0, renew_interval: Optional[float] = None,
                 abort_grace_period: float = 1.0, retry_after: float = 1.0,
                 on_outcome: Optional[Callable[[str, Outcome], None]] = None,
                 on_event: Optional[Callable[[str, Dict[str, Any]], None]] = None,
                 queues: Optional[List[str]] = None):
        """queues are queues the worker claims from beside its handlers' own: each execution is
        in its workflow's queue unless it was admitted to a named one, so by default the worker
        leases only what it has a handler for. At most 64 queues in all."""
        renew_interval = lease_duration / 3 if renew_interval is None else renew_interval
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not 0.001 <= poll_interval <= 60:
            # 0 would make an idle worker claim in a busy loop.
            raise ValueError("poll_interval must be from 0.001 to 60 seconds")
        if lease_duration < 0.001:
            raise ValueError("lease_duration must be at least a millisecond")
        if not 0 < renew_interval < lease_duration:
            raise ValueError("renew_interval must be positive and shorter than lease_duration")
        if abort_grace_period < 0 or retry_after < 0:
            raise ValueError("abort_grace_period and retry_after must not be negative")
        self.queues = sorted(set(handlers) | set(queues or []))
        if not 1 <= len(self.queues) <= 64:
            raise ValueError("a worker claims from 1 to 64 queues: its handlers' workflows and queues")
        self.client = client
        self.handlers = handlers
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.lease_ms = int(lease_duration * 1000)
        self.renew_interval = renew_interval
        self.abort_grace_period = abort_grace_period
        self.retry_after_ms = int(retry_after * 1000)
        self.on_outcome = on_outcome
        self.on_event = on_event
        self._cond = threading.Condition()
        self._state = _STOPPED
        self._in_flight: Dict[str, threading.Thread] = {}  # by "id#token"
        self._pending: List[Ack] = []
        self._not_before = 0.0  # time.monotonic() before which no round starts (after a failure)
        self._loop: Optional[threading.Thread] = None

    @property
    def active_deliveries(self) -> int:
        with self._cond:
            return len(self._in_flight)

    @property
    def state(self) -> str:
        """"stopped", "running", or "stopping" (while stop() runs)."""
        with self._cond:
            return self._state

    @property
    def _running(self) -> bool:
        return self._state == _RUNNING

    def start(self) -> None:
        """Starts claiming and running executions; nothing if running already.

        Raises RuntimeError while stop() runs: start again once it returned."""
        with self._cond:
            if self._state == _RUNNING:
                return
            if self._state == _STOPPING:
                raise RuntimeError("the worker is stopping: start it again once stop() has returned")
            self._state = _RUNNING
            # Started under the lock: a stop() that follows joins a started thread.
            self._loop = threading.Thread(target=self._run, name="execstore-worker", daemon=True)
            self._loop.start()

    def stop(self) -> None:
        """Stops claiming, waits for the running deliveries (a claim in flight
        first: it waits at most poll_interval on the server), and acknowledges
        what they returned. A stop() while another runs waits for it."""
        with self._cond:
            if self._state == _STOPPING:
                while self._state == _STOPPING:
                    self._cond.wait()
                return
            if self._state == _STOPPED:
                return
            self._state = _STOPPING
            loop = self._loop
            self._cond.notify_all()
        try:
            if loop is not None:
                loop.join()
            with self._cond:
                while self._in_flight:
                    self._cond.wait()
            self._drain()
        finally:
            with self._cond:
                self._state = _STOPPED
                self._loop = None
                self._cond.notify_all()

    def _drain(self) -> None:
        """Acknowledges what is pending, for stop(). What is still pending
        after STOP_ATTEMPTS failures stays queued for a later start()."""
        failures = 0
        while failures < STOP_ATTEMPTS:
            with self._cond:
                acks = self._take_acks()
            if not acks:
                return
            delay = self._not_before - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if not self._acknowledge(acks):
                failures += 1
        with self._cond:
            left = len(self._pending)
        if left:
            _log.warning("execstore worker: %d acknowledgements not sent at stop; their leases will expire", left)

    # The loop.

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._running and self._not_before > time.monotonic():
                    self._cond.wait(self._not_before - time.monotonic())
                if not self._running:
                    return
                acks = self._take_acks()
                slots = min(self.concurrency - len(self._in_flight), BATCH_MAX)
                if not acks and slots == 0:
                    self._cond.wait()
                    continue
                idle = not acks and not self._in_flight
            if slots == 0:
                self._acknowledge(acks)
                continue
            try:
                results, leases, executions = self._round(acks, slots, int(self.poll_interval * 1000) if idle else 0)
            except Exception as err:  # noqa: BLE001 - a round failed: reported, and retried or split
                self._event("claimFailed", {"error": err})
                if acks and _refused(err):
                    self._acknowledge_each(acks)  # nothing was written, nothing claimed
                else:
                    # Acknowledgements are safe to send again (a repeat answers
                    # as a replay); a claim whose answer was lost left its
                    # leases to expire.
                    self._requeue(acks, err)
                continue
            # The leases first: what the observers do cannot lose them.
            self._deliver_all(leases, executions)
            self._settle(acks, results)
            with self._cond:
                if not leases and self._in_flight and not self._pending and self._running:
                    self._cond.wait(self.poll_interval)

    def _take_acks(self) -> List[Ack]:
        """The next acknowledgements to send, at most BATCH_MAX; under _cond."""
        acks = self._pending[:BATCH_MAX]
        del self._pending[:BATCH_MAX]
        return acks

    def _round(self, acks: List[Ack], slots: int, wait_ms: int) -> Tuple[List[Dict[str, Any]], List[Lease], Optional[List[Dict[str, Any]]]]:
        # A request key per round: the client repeats a round whose answer it
        # lost, and the repeat answers the same leases instead of stranding them.
        key = uuid.uuid4().hex
        if not acks:
            answer = self.client.claim(slots, self.lease_ms, True, wait_ms, key, self.queues)
            return [], answer["leases"], answer.get("executions")
        answer = self.client.acknowledge_and_claim(acks, slots, self.lease_ms, True, wait_ms, key, self.queues)
        return answer["results"], answer["leases"], answer.get("executions")

    def _requeue(self, acks: Sequence[Ack], err: Optional[BaseException]) -> None:
        """Queues acks again, first, and holds the next round back for the
        backoff or the 503's Retry-After, whatever wakes the loop meanwhile."""
        wait = max(self.poll_interval, FAILURE_WAIT_MIN)
        if isinstance(err, UnavailableError) and err.retry_after is not None:
            wait = max(err.retry_after, FAILURE_WAIT_MIN)
        with self._cond:
            self._pending[:0] = acks
            self._not_before = max(self._not_before, time.monotonic() + wait)

    # Acknowledgements.

    def _acknowledge(self, acks: List[Ack]) -> bool:
        """Sends acks in one batch; False if some are queued again."""
        try:
            results = self.client.acknowledge_batch(acks)
        except Exception as err:  # noqa: BLE001 - reported, and retried or split
            self._event("claimFailed", {"error": err})
            if _refused(err):
                return self._acknowledge_each(acks)
            self._requeue(acks, err)
            return False
        return self._settle(acks, results)

    def _acknowledge_each(self, acks: List[Ack]) -> bool:
        """Sends each acknowledgement alone, after their batch was refused:
        one the server refuses alone is dropped, and does not hold back the
        others. False if some are queued again."""
        again: List[Ack] = []
        last: Optional[BaseException] = None
        for ack in acks:
            try:
                result = self.client.acknowledge(ack["lease"], ack["outcome"])
            except ExecstoreError as err:
                result = {"code": err.code or f"HTTP_{err.status}", "message": err.message}
                if isinstance(err, UnavailableError):
                    last = err
            except Exception as err:  # noqa: BLE001 - no answer: sent again later
                self._event("acknowledgeRetried", {"executionId": ack["lease"]["executionId"], "error": err})
                again.append(ack)
                last = err
                continue
            if self._settle_one(ack, result):
                again.append(ack)
        if again:
            self._requeue(again, last)
        return not again

    def _settle(self, acks: List[Ack], results: List[Dict[str, Any]]) -> bool:
        """Reports each acknowledgement's answer and queues again those the
        store could not take (and any the answer left out); False if some were."""
        again = [ack for ack, res in zip(acks, results) if self._settle_one(ack, res)]
        again += acks[len(results):]
        if again:
            self._requeue(again, None)
        return not again

    def _settle_one(self, ack: Ack, result: Dict[str, Any]) -> bool:
        """Reports one acknowledgement's answer; True if it is to be sent again."""
        eid = ack["lease"]["executionId"]
        code = result.get("code")
        if code in UNAVAILABLE_CODES:
            self._event("acknowledgeRetried", {"executionId": eid, "error": result})
            return True
        if code == "LEASE_LOST":
            self._event("leaseLost", {"executionId": eid, "token": ack["lease"]["token"]})
        elif code:
            _log.warning("execstore worker: the acknowledgement of %s was refused and dropped (its lease will expire): %s %s",
                         eid, code, result.get("message", ""))
            self._event("acknowledgeDropped", {"executionId": eid, "error": result, "outcome": ack["outcome"]})
        elif result.get("applied"):
            self._observe_outcome(eid, ack["outcome"])
        else:
            self._event("notApplied", {"executionId": eid})
        return False

    # Observers: what they raise never reaches the worker.

    def _event(self, kind: str, detail: Dict[str, Any]) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(kind, detail)
        except Exception:  # noqa: BLE001 - an observer's failure is its own
            _log.exception("execstore worker: on_event(%r) raised; ignored", kind)

    def _observe_outcome(self, execution_id: str, outcome: Outcome) -> None:
        if self.on_outcome is None:
            return
        try:
            self.on_outcome(execution_id, outcome)
        except Exception:  # noqa: BLE001 - an observer's failure is its own
            _log.exception("execstore worker: on_outcome(%r) raised; ignored", execution_id)

    # Deliveries.

    def _deliver_all(self, leases: List[Lease], executions: Optional[List[Dict[str, Any]]]) -> None:
        # By ID rather than by position: an answer may leave some out.
        by_id = {e["executionId"]: e for e in executions or [] if isinstance(e, dict) and "executionId" in e}
        for lease in leases:
            self._deliver(lease, by_id.get(lease["executionId"]))

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
        try:
            if execution is None:
                execution = self._fetch(lease)
            if execution is not None:
                self._run_handler(key, lease, execution)
        finally:
            self._free(key)  # whatever happened above

    def _fetch(self, lease: Lease) -> Optional[Dict[str, Any]]:
        """The execution of a lease the claim's answer did not carry, read
        from its record (its steps are read as the handler asks for them);
        None, and the lease released, if the read fails."""
        eid = lease["executionId"]
        try:
            rec = self.client.get(eid)
            execution = {"executionId": rec["executionId"], "workflowId": rec["workflowId"],
                         "context": rec.get("context", {}), "attempt": lease["token"],
                         "maxAttempts": rec.get("maxAttempts", 0), "steps": [], "moreSteps": True}
            if "params" in rec:
                execution["params"] = rec["params"]
            return execution
        except Exception as err:  # noqa: BLE001 - reported; the lease is released for a retry
            self._event("readFailed", {"executionId": eid, "error": err})
            self._release(lease, err)
            return None

    def _run_handler(self, key: str, lease: Lease, execution: Dict[str, Any]) -> None:
        ctx = Delivery(self, lease, execution)
        handler = self.handlers.get(ctx.workflow_id)
        stop = threading.Event()
        threading.Thread(target=self._renew, args=(key, ctx, stop), name=f"execstore-renew-{key}", daemon=True).start()
        outcome: Optional[Outcome] = None
        release: Optional[BaseException] = None
        try:
            if handler is None:
                self._event("noHandler", {"executionId": ctx.execution_id, "workflowId": ctx.workflow_id})
                release = LookupError(f"no handler for workflow {ctx.workflow_id}")
            else:
                outcome = self._outcome_of(ctx, handler(ctx))
        except Failure as err:
            outcome = self._checked(ctx, {"status": "failed", "error": error_info(err)})
        except ExitWithoutReply:
            self._event("exitedWithoutReply", {"executionId": ctx.execution_id})
        except LeaseLostError:
            self._event("leaseLost", {"executionId": ctx.execution_id, "token": lease["token"]})
        except BaseException as err:  # noqa: BLE001 - a retryable failure: the lease is released
            release = err
        finally:
            # Not joined: a renewal in flight ends on its own, and the outcome
            # names the lease by its token, which a renewal keeps.
            stop.set()
        if ctx.lease_lost.is_set():
            return
        if release is not None:
            self._release(ctx.lease, release)
            return
        with self._cond:
            if key not in self._in_flight:
                return  # abandoned: its outcome is ignored
            if outcome is not None:
                self._pending.append({"lease": ctx.lease, "outcome": outcome})
            del self._in_flight[key]
            self._cond.notify_all()

    def _outcome_of(self, ctx: Delivery, value: Any) -> Outcome:
        if value is SUSPENDED:
            return {"status": "suspended"}
        if value is None:
            return {"status": "completed"}
        return self._checked(ctx, {"status": "completed", "result": value})

    def _checked(self, ctx: Delivery, outcome: Outcome) -> Outcome:
        """outcome, or a failed one if it is not JSON (the handler's value is
        not): checked here, so that no round ever carries it."""
        try:
            json.dumps(outcome, allow_nan=False)
            return outcome
        except (TypeError, ValueError, RecursionError) as err:
            self._event("invalidResult", {"executionId": ctx.execution_id, "error": err})
            return {"status": "failed", "error": {
                "name": "InvalidResult", "code": "RESULT_NOT_JSON",
                "message": f"the handler's {outcome['status']} outcome is not JSON and cannot be recorded: {err}"}}

    def _release(self, lease: Lease, err: BaseException) -> None:
        eid = lease["executionId"]
        try:
            self.client.release(lease, self.retry_after_ms, error_info(err))
        except Exception as failed:  # noqa: BLE001 - the lease will expire instead
            self._event("releaseFailed", {"executionId": eid, "error": failed})
            return
        self._event("released", {"executionId": eid, "error": err})

    def _renew(self, key: str, ctx: Delivery, stop: threading.Event) -> None:
        while not stop.wait(self.renew_interval):
            try:
                ctx._renewed(self.client.renew(ctx.lease, self.lease_ms))
            except ExecstoreError as err:
                if err.code in ("LEASE_LOST", "EXECUTION_NOT_FOUND"):
                    ctx.lease_lost.set()
                    self._event("leaseLost", {"executionId": ctx.execution_id, "token": ctx.lease["token"]})
                    # Abandon the delivery if it does not end within the grace period.
                    if not stop.wait(self.abort_grace_period):
                        if self._free(key):
                            self._event("abandoned", {"executionId": ctx.execution_id})
                    return
            except Exception:  # noqa: BLE001 - keep trying: the lease stays current until superseded
                pass
