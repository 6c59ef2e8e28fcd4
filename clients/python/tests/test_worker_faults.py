"""The Worker against a fake server, for answers the real binary cannot be
made to give: a batch refused as a whole, one acknowledgement's NOT_LEADER, a
503 with Retry-After, a claim whose answer leaves an execution out, a renewal
that does not answer."""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from conftest import Answer, FakeServer, acked_ids, applied, eventually, execution, lease
from execstore_client import Client, Delivery, Worker

Events = List[Tuple[str, Dict[str, Any]]]


def observed() -> Tuple[Dict[str, Any], Events, Callable[[str, Any], None], Callable[[str, Dict[str, Any]], None]]:
    """on_outcome and on_event that record what they are told."""
    outcomes: Dict[str, Any] = {}
    events: Events = []
    return outcomes, events, outcomes.__setitem__, lambda kind, detail: events.append((kind, detail))


def kinds(events: Events, kind: str) -> List[str]:
    return [d.get("executionId", "") for k, d in list(events) if k == kind]


class Claims:
    """A route's claims: the first answers leases (with executions as given),
    and each later one what serve() queued; None when there is nothing."""

    def __init__(self, leases: List[Dict[str, Any]], executions: Optional[List[Dict[str, Any]]]):
        self._lock = threading.Lock()
        self._queue: List[Tuple[List[Dict[str, Any]], Optional[List[Dict[str, Any]]]]] = [(leases, executions)]

    def serve(self, leases: List[Dict[str, Any]], executions: Optional[List[Dict[str, Any]]]) -> None:
        with self._lock:
            self._queue.append((leases, executions))

    def answer(self, path: str, body: Any) -> Optional[Answer]:
        if path not in ("/v1/claims", "/v1/leases/acknowledge-and-claim"):
            return None
        with self._lock:
            if not self._queue:
                return None
            leases, executions = self._queue.pop(0)
        out: Dict[str, Any] = {"leases": leases, "now": "2026-01-02T12:00:00Z"}
        if executions is not None:
            out["executions"] = executions
        if "acknowledgements" in body:
            out["results"] = [applied(a) for a in body["acknowledgements"]]
        return 200, out, {}


def refused(path: str) -> Answer:
    return 400, {"code": "INVALID_ARGUMENT", "message": f"{path}: refused"}, {}


def test_a_refused_acknowledgement_is_dropped_alone_and_the_worker_claims_on(fake: Callable[..., FakeServer]) -> None:
    # "A 4xx answer to the batch ... split it ... so one bad ack never blocks the others."
    claims = Claims([lease("bad-1")], [execution("bad-1", "w")])

    def route(method: str, path: str, body: Any) -> Optional[Answer]:
        if "bad-1" in acked_ids(body):
            if path == "/v1/leases/acknowledge":
                claims.serve([lease("good-2")], [execution("good-2", "w")])
            return refused(path)
        return claims.answer(path, body)

    srv = fake(route)
    outcomes, events, on_outcome, on_event = observed()
    worker = Worker(Client(srv.url, attempts=1), {"w": lambda ctx: ctx.execution_id}, poll_interval=0.05,
                    on_outcome=on_outcome, on_event=on_event)
    worker.start()
    eventually("good-2 was claimed and acknowledged", lambda: "good-2" in outcomes, patience=10)
    worker.stop()
    assert kinds(events, "acknowledgeDropped") == ["bad-1"]
    assert "bad-1" not in outcomes
    sent = [b for _, _, _, b in srv.requests if "bad-1" in acked_ids(b)]
    assert len(sent) == 2, "bad-1's acknowledgement was sent in its batch, then alone, and no more"


def test_stop_splits_a_refused_batch_and_acknowledges_the_others(fake: Callable[..., FakeServer]) -> None:
    claims = Claims([lease("bad-1"), lease("good-1")], [execution("bad-1", "w"), execution("good-1", "w")])

    def route(method: str, path: str, body: Any) -> Optional[Answer]:
        if "bad-1" in acked_ids(body):
            return refused(path)
        return claims.answer(path, body)

    srv = fake(route)
    go = threading.Event()
    outcomes, events, on_outcome, on_event = observed()

    def handler(ctx: Delivery) -> str:
        go.wait(30)
        return ctx.execution_id

    worker = Worker(Client(srv.url, attempts=1), {"w": handler}, poll_interval=0.05, on_outcome=on_outcome, on_event=on_event)
    worker.start()
    eventually("both deliveries run", lambda: worker.active_deliveries == 2)
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    eventually("stop() began", lambda: worker.state == "stopping")
    go.set()
    stopper.join(30)
    assert not stopper.is_alive()
    assert list(outcomes) == ["good-1"]
    assert kinds(events, "acknowledgeDropped") == ["bad-1"]
    batch = srv.paths("/v1/leases/acknowledge-batch")
    assert len(batch) == 1 and sorted(acked_ids(batch[0])) == ["bad-1", "good-1"]
    assert sorted(acked_ids(b)[0] for b in srv.paths("/v1/leases/acknowledge")) == ["bad-1", "good-1"]


@pytest.mark.parametrize("code", ["NOT_LEADER", "OUTCOME_UNKNOWN", "CLOSED", "STORAGE_FAILED", "CANCELLED"])
def test_an_acknowledgement_the_store_could_not_take_is_sent_again(fake: Callable[..., FakeServer], code: str) -> None:
    claims = Claims([lease("a-1")], [execution("a-1", "w")])
    first = [True]

    def route(method: str, path: str, body: Any) -> Optional[Answer]:
        if path == "/v1/leases/acknowledge-and-claim" and first[0]:
            first[0] = False
            return 200, {"results": [{"code": code, "message": "not now"}], "leases": [], "now": "2026-01-02T12:00:00Z"}, {}
        return claims.answer(path, body)

    srv = fake(route)
    outcomes, events, on_outcome, on_event = observed()
    worker = Worker(Client(srv.url, attempts=1), {"w": lambda ctx: "done"}, poll_interval=0.05,
                    on_outcome=on_outcome, on_event=on_event)
    worker.start()
    eventually("a-1 acknowledged", lambda: "a-1" in outcomes, patience=10)
    worker.stop()
    assert outcomes["a-1"] == {"status": "completed", "result": "done"}
    assert kinds(events, "acknowledgeRetried") == ["a-1"]
    assert kinds(events, "acknowledgeDropped") == []


def test_stop_sends_again_an_acknowledgement_the_store_could_not_take(fake: Callable[..., FakeServer]) -> None:
    claims = Claims([lease("a-1")], [execution("a-1", "w")])
    first = [True]

    def route(method: str, path: str, body: Any) -> Optional[Answer]:
        if path == "/v1/leases/acknowledge-batch" and first[0]:
            first[0] = False
            return 200, {"results": [{"code": "NOT_LEADER", "message": "no leader"}]}, {}
        return claims.answer(path, body)

    srv = fake(route)
    go = threading.Event()
    outcomes, events, on_outcome, on_event = observed()
    worker = Worker(Client(srv.url, attempts=1), {"w": lambda ctx: go.wait(30) and "done"}, poll_interval=0.05,
                    on_outcome=on_outcome, on_event=on_event)
    worker.start()
    eventually("a-1 runs", lambda: worker.active_deliveries == 1)
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    eventually("stop() began", lambda: worker.state == "stopping")
    go.set()
    stopper.join(30)
    assert not stopper.is_alive()
    assert outcomes == {"a-1": {"status": "completed", "result": "done"}}
    assert len(srv.paths("/v1/leases/acknowledge-batch")) == 2


def test_a_failed_round_waits_its_retry_after_even_when_a_delivery_ends(fake: Callable[..., FakeServer]) -> None:
    # "The wait after a failure must last at least the backoff / Retry-After, whatever wakes the loop."
    claims = Claims([lease("a-1")], [execution("a-1", "w")])
    unavailable = [True]

    def route(method: str, path: str, body: Any) -> Optional[Answer]:
        if path == "/v1/claims" and srv.paths("/v1/claims")[:-1] and unavailable[0]:
            unavailable[0] = False  # the second claim: no leader, come back in a second
            return 503, {"code": "NOT_LEADER", "message": "no leader"}, {"Retry-After": "1"}
        return claims.answer(path, body)

    srv = fake(route)
    failed, go = threading.Event(), threading.Event()
    outcomes: Dict[str, Any] = {}

    def on_event(kind: str, detail: Dict[str, Any]) -> None:
        if kind == "claimFailed":
            failed.set()

    worker = Worker(Client(srv.url, attempts=1), {"w": lambda ctx: go.wait(30) and "done"}, poll_interval=0.05,
                    on_outcome=outcomes.__setitem__, on_event=on_event)
    worker.start()
    assert failed.wait(10)
    go.set()  # the delivery ends during the wait, and wakes the loop
    eventually("a-1 acknowledged", lambda: "a-1" in outcomes, patience=10)
    worker.stop()
    times = [t for t, _, _, _ in srv.requests]
    refused_at = [t for t, _, p, _ in srv.requests if p == "/v1/claims"][1]
    after = times[times.index(refused_at) + 1]
    assert after - refused_at >= 1.0, f"the next round came {after - refused_at:.3f} s after the 503, before its Retry-After"


@pytest.mark.parametrize("executions", ["absent", "partial"])
def test_a_lease_whose_execution_the_claim_left_out_is_read_then_delivered(fake: Callable[..., FakeServer], executions: str) -> None:
    carried = None if executions == "absent" else [execution("b-1", "w", {"n": 2})]
    claims = Claims([lease("a-1", token=3), lease("b-1")], carried)

    def route(method: str, path: str, body: Any) -> Optional[Answer]:
        if path == "/v1/executions/a-1":
            return 200, {"executionId": "a-1", "workflowId": "w", "params": {"n": 1}, "status": "admitted",
                         "attempts": 3, "maxAttempts": 5, "lease": lease("a-1", token=3)}, {}
        if path == "/v1/executions/a-1/steps/s":
            return 200, {"saved": True, "value": 7}, {}
        if path == "/v1/executions/b-1":
            return 200, {"executionId": "b-1", "workflowId": "w", "params": {"n": 2}, "status": "admitted",
                         "attempts": 1, "maxAttempts": 0}, {}
        if path == "/v1/executions/b-1/steps/s":
            return 200, {"saved": False}, {}
        if path == "/v1/leases/steps":
            return 200, {"applied": True, "value": body["value"]}, {}
        return claims.answer(path, body)

    srv = fake(route)
    outcomes, events, on_outcome, on_event = observed()

    def handler(ctx: Delivery) -> Dict[str, Any]:
        return {"n": ctx.params["n"], "s": ctx.step("s", lambda: 0), "attempt": ctx.attempt, "max": ctx.max_attempts}

    worker = Worker(Client(srv.url, attempts=1), {"w": handler}, poll_interval=0.05, on_outcome=on_outcome, on_event=on_event)
    worker.start()
    eventually("both acknowledged", lambda: len(outcomes) == 2, patience=10)
    worker.stop()
    assert outcomes["a-1"]["result"] == {"n": 1, "s": 7, "attempt": 3, "max": 5}
    assert outcomes["b-1"]["result"] == {"n": 2, "s": 0, "attempt": 1, "max": 0}
    assert srv.paths("/v1/leases/release") == []


def test_a_lease_whose_execution_cannot_be_read_is_released(fake: Callable[..., FakeServer]) -> None:
    claims = Claims([lease("a-1")], None)

    def route(method: str, path: str, body: Any) -> Optional[Answer]:
        if path == "/v1/executions/a-1":
            return 500, {"code": "INTERNAL", "message": "a bug"}, {}
        return claims.answer(path, body)

    srv = fake(route)
    ran = threading.Event()
    outcomes, events, on_outcome, on_event = observed()
    worker = Worker(Client(srv.url, attempts=1), {"w": lambda ctx: ran.set()}, poll_interval=0.05, retry_after=2.0,
                    on_outcome=on_outcome, on_event=on_event)
    worker.start()
    eventually("a-1 released", lambda: "a-1" in kinds(events, "released"), patience=10)
    worker.stop()
    assert not ran.is_set() and outcomes == {}
    assert kinds(events, "readFailed") == ["a-1"]
    released = srv.paths("/v1/leases/release")
    assert len(released) == 1 and released[0]["lease"]["executionId"] == "a-1" and released[0]["retryAfterMs"] == 2000


def test_the_outcome_is_queued_while_a_renewal_is_in_flight(fake: Callable[..., FakeServer]) -> None:
    # "The worker joins the renewer thread before queuing the outcome."
    claims = Claims([lease("a-1")], [execution("a-1", "w")])
    renewing, unblock, acked = threading.Event(), threading.Event(), threading.Event()

    def route(method: str, path: str, body: Any) -> Optional[Answer]:
        if path == "/v1/leases/renew":
            renewing.set()
            unblock.wait(60)
            return None
        if "a-1" in acked_ids(body):
            acked.set()
        return claims.answer(path, body)

    srv = fake(route)
    worker = Worker(Client(srv.url, attempts=1), {"w": lambda ctx: renewing.wait(30) and "done"}, poll_interval=0.05,
                    lease_duration=30.0, renew_interval=0.05)
    worker.start()
    try:
        assert acked.wait(10), "the outcome waited for the renewal in flight"
    finally:
        unblock.set()
        worker.stop()
