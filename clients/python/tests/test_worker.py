"""The Worker against the real binary: every execution completes once with its
steps run once, a lost lease stops the delivery, a rejection releases it, a
value that is not JSON fails its execution alone, an observer that raises
changes nothing, and a server killed with SIGKILL mid-run loses nothing."""

import threading
from typing import Any, Dict, List, Tuple

import pytest

from conftest import Server, eventually
from execstore_client import Client, Delivery, ExitWithoutReply, Failure, Worker


def admit_orders(client, prefix, n):
    ids = [f"{prefix}-{i}" for i in range(n)]
    for i, eid in enumerate(ids):
        client.admit("charge", eid, {"order": i})
    return ids


def test_completes_every_execution_once_each_step_once_in_few_requests(server):
    requests = []
    client = Client(server.url, on_request=lambda m, p: requests.append(p))
    ran, outcomes, lock = {}, {}, threading.Lock()

    def charge(ctx):
        def run():
            with lock:
                ran[ctx.execution_id] = ran.get(ctx.execution_id, 0) + 1
            return {"receipt": f"r-{ctx.params['order']}"}
        return {**ctx.step("charge", run), "order": ctx.params["order"]}

    ids = admit_orders(Client(server.url), "w1", 200)
    worker = Worker(client, {"charge": charge}, concurrency=16,
                    on_outcome=lambda eid, o: outcomes.__setitem__(eid, o))
    worker.start()
    eventually("every execution completed", lambda: len(outcomes) == 200)
    worker.stop()
    for i, eid in enumerate(ids):
        rec = client.get(eid)
        assert rec["status"] == "completed", eid
        assert rec["outcome"]["result"] == {"receipt": f"r-{i}", "order": i}
        assert ran[eid] == 1, f"{eid}'s step ran {ran[eid]} times"
    worker_requests = len(requests) - len(ids)  # the gets above are the test's
    print(f"{worker_requests} requests for 200 executions ({worker_requests / 200:.2f} each)")
    assert worker_requests <= 2 * 200, f"{worker_requests} requests for 200 executions"


def test_a_lost_lease_stops_the_delivery_which_is_neither_acknowledged_nor_released(server):
    client = Client(server.url)
    events, started = [], threading.Event()

    def slow(ctx):
        started.set()
        ctx.lease_lost.wait(30)
        return "too late"

    worker = Worker(client, {"slow": slow}, lease_duration=2.0, renew_interval=0.1,
                    on_event=lambda kind, detail: events.append((kind, detail)))
    client.admit("slow", "lost-1")
    worker.start()
    assert started.wait(30)
    client.cancel("lost-1", "the customer cancelled")
    eventually("the renewal found the lease lost", lambda: any(k == "leaseLost" for k, _ in events))
    worker.stop()
    assert not any(k == "released" for k, _ in events)
    rec = client.get("lost-1")
    assert rec["status"] == "cancelled"


def test_a_delivery_that_ignores_the_loss_is_abandoned_and_its_slot_freed(server):
    client = Client(server.url)
    events, release = [], threading.Event()

    def stubborn(ctx):
        release.wait(60)  # ignores lease_lost
        return "ignored"

    worker = Worker(client, {"stubborn": stubborn, "charge": lambda ctx: {"order": ctx.params["order"]}},
                    concurrency=1, lease_duration=2.0, renew_interval=0.1, abort_grace_period=0.2,
                    on_event=lambda kind, detail: events.append(kind))
    client.admit("stubborn", "stubborn-1")
    worker.start()
    eventually("the stubborn delivery runs", lambda: worker.active_deliveries == 1)
    client.cancel("stubborn-1", "stop")
    eventually("it was abandoned", lambda: "abandoned" in events)
    client.admit("charge", "after-1", {"order": 1})
    eventually("the freed slot ran the next execution", lambda: client.get("after-1")["status"] == "completed")
    release.set()
    worker.stop()


def test_a_rejection_releases_a_failure_fails_and_an_exit_leaves_the_lease(server):
    client = Client(server.url)
    attempts = {}

    def flaky(ctx):
        attempts[ctx.execution_id] = ctx.attempt
        if ctx.attempt == 1:
            raise TimeoutError("the gateway timed out")
        return "done"

    def declined(ctx):
        raise Failure("card declined", name="PaymentError", code="DECLINED")

    def vanish(ctx):
        if ctx.attempt == 1:
            raise ExitWithoutReply()
        return "second"

    worker = Worker(client, {"flaky": flaky, "declined": declined, "vanish": vanish},
                    retry_after=0, lease_duration=1.0, renew_interval=0.3)
    for wf in ("flaky", "declined", "vanish"):
        client.admit(wf, f"{wf}-1")
    worker.start()
    eventually("all three ended", lambda: all(client.get(f"{wf}-1")["status"] in ("completed", "failed")
                                              for wf in ("flaky", "declined", "vanish")))
    worker.stop()
    assert client.get("flaky-1")["status"] == "completed" and attempts["flaky-1"] == 2
    declined_rec = client.get("declined-1")
    assert declined_rec["status"] == "failed"
    assert declined_rec["outcome"]["error"] == {"name": "PaymentError", "message": "card declined", "code": "DECLINED"}
    vanish_rec = client.get("vanish-1")
    assert vanish_rec["status"] == "completed" and vanish_rec["attempts"] == 2


def test_a_server_killed_with_sigkill_mid_run_loses_nothing(make_server):
    srv = make_server()
    client = Client(srv.url, attempts=50, retry_base_delay=0.02, retry_max_delay=0.2)
    worker = Worker(client, {"charge": lambda ctx: ctx.step("charge", lambda: {"receipt": f"r-{ctx.params['order']}"})},
                    concurrency=8, lease_duration=2.0, renew_interval=0.5, poll_interval=0.2)
    ids = admit_orders(client, "k", 300)
    worker.start()

    def completed():
        return client.stats().get("byStatus", {}).get("completed", 0)

    for _ in range(2):
        before = completed()
        eventually("some progress before the kill", lambda: completed() > before + 30 or completed() == 300)
        srv.kill()
        srv.up()
    eventually("every execution completed after the kills", lambda: completed() == 300, patience=60)
    worker.stop()
    for i, eid in enumerate(ids):
        rec = client.get(eid)
        assert rec["status"] == "completed", eid
        assert rec["outcome"]["result"] == {"receipt": f"r-{i}"}


def test_a_value_that_is_not_json_fails_its_execution_and_holds_back_no_other(server: Server) -> None:
    # "A result that cannot be serialised to JSON ... stalls the worker."
    client = Client(server.url)
    events: List[Tuple[str, Dict[str, Any]]] = []
    worker = Worker(client, {"set": lambda ctx: {1, 2}, "nan": lambda ctx: {"ratio": float("nan")},
                             "charge": lambda ctx: {"order": ctx.params["order"]}},
                    concurrency=1, poll_interval=0.05, on_event=lambda kind, detail: events.append((kind, detail)))
    client.admit("set", "set-1")
    client.admit("nan", "nan-1")
    client.admit("charge", "charge-1", {"order": 1})
    worker.start()
    eventually("all three ended", lambda: all(client.get(eid)["status"] in ("completed", "failed")
                                              for eid in ("set-1", "nan-1", "charge-1")), patience=10)
    worker.stop()
    for eid in ("set-1", "nan-1"):
        rec = client.get(eid)
        assert rec["status"] == "failed" and rec["attempts"] == 1, eid
        assert rec["outcome"]["error"]["code"] == "RESULT_NOT_JSON" and rec["outcome"]["error"]["name"] == "InvalidResult"
    assert client.get("charge-1")["outcome"]["result"] == {"order": 1}
    assert sorted(d["executionId"] for k, d in events if k == "invalidResult") == ["nan-1", "set-1"]


def test_an_observer_that_raises_loses_no_lease_and_no_slot(server: Server) -> None:
    # "A throwing onOutcome/onEvent callback ... loses the round's leases";
    # "a delivery thread that raises dies without freeing its slot".
    client = Client(server.url)

    def observer(*args: Any) -> None:
        raise RuntimeError("the observer failed")

    def flaky(ctx: Delivery) -> str:
        if ctx.attempt == 1:
            raise TimeoutError("the gateway timed out")  # released: on_event("released") raises
        return "done"

    worker = Worker(client, {"charge": lambda ctx: ctx.params["order"], "flaky": flaky}, concurrency=1,
                    poll_interval=0.05, lease_duration=60.0, retry_after=0, on_outcome=observer, on_event=observer)
    ids = [f"obs-{i}" for i in range(3)]
    for i, eid in enumerate(ids):
        client.admit("charge", eid, {"order": i})
    client.admit("flaky", "flaky-1")
    worker.start()
    # Well within lease_duration: a lease dropped on the floor would wait for it to expire.
    eventually("every execution completed", lambda: all(client.get(eid)["status"] == "completed"
                                                        for eid in ids + ["flaky-1"]), patience=20)
    worker.stop()
    for eid in ids:
        assert client.get(eid)["attempts"] == 1, f"{eid} was delivered again"
    assert client.get("flaky-1")["attempts"] == 2


class Interrupt(BaseException):
    """Not an Exception: what a handler may raise all the same."""


def test_a_handler_that_raises_a_base_exception_releases_its_lease_and_frees_its_slot(server: Server) -> None:
    client = Client(server.url)

    def abrupt(ctx: Delivery) -> str:
        if ctx.attempt == 1:
            raise Interrupt("interrupted")
        return "second"

    released: List[Dict[str, Any]] = []
    worker = Worker(client, {"abrupt": abrupt}, concurrency=1, poll_interval=0.05, retry_after=0,
                    lease_duration=60.0, on_event=lambda kind, detail: released.append(detail) if kind == "released" else None)
    client.admit("abrupt", "abrupt-1")
    worker.start()
    eventually("abrupt-1 completed", lambda: client.get("abrupt-1")["status"] == "completed", patience=20)
    worker.stop()
    assert client.get("abrupt-1")["attempts"] == 2
    assert isinstance(released[0]["error"], Interrupt)


def test_start_during_stop_raises_and_start_after_stop_runs_again(server: Server) -> None:
    client = Client(server.url)
    go = threading.Event()
    worker = Worker(client, {"slow": lambda ctx: go.wait(30) and "slow", "charge": lambda ctx: "charged"}, poll_interval=0.05)
    client.admit("slow", "slow-1")
    worker.start()
    eventually("slow-1 runs", lambda: worker.active_deliveries == 1)
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    eventually("stop() began", lambda: worker.state == "stopping")
    with pytest.raises(RuntimeError, match="stopping"):
        worker.start()
    go.set()
    stopper.join(30)
    assert not stopper.is_alive()
    assert client.get("slow-1")["outcome"]["result"] == "slow"
    client.admit("charge", "charge-1")
    worker.start()
    assert client.wait("charge-1", timeout=30)["outcome"]["result"] == "charged"
    worker.stop()


@pytest.mark.parametrize("poll_interval", [0, -1, 61])
def test_a_poll_interval_that_would_spin_or_outwait_the_server_is_refused(poll_interval: float) -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        Worker(Client("http://127.0.0.1:9"), {}, poll_interval=poll_interval)


def test_workers_lease_only_the_workflows_they_have_handlers_for(server: Server) -> None:
    """Each execution is in its workflow's queue unless admitted to a named one: two workers
    with different handlers never lease each other's executions (no noHandler event, which a
    worker that leased a workflow it cannot run would report), and queues= adds a named queue."""
    client = Client(server.url)
    events: List[Tuple[str, str]] = []
    ran: Dict[str, str] = {}
    lock = threading.Lock()

    def handler(name: str):
        def run(ctx: Delivery) -> Any:
            with lock:
                ran[ctx.execution_id] = name
            return name
        return run

    with pytest.raises(ValueError):
        Worker(client, {})
    charges = Worker(client, {"charge": handler("charges")}, queues=["payments"],
                     on_event=lambda kind, detail: events.append(("charges", kind)))
    emails = Worker(client, {"email": handler("emails")},
                    on_event=lambda kind, detail: events.append(("emails", kind)))
    assert charges.queues == ["charge", "payments"]
    for i in range(20):
        client.admit("charge", f"c-{i}")
        client.admit("email", f"e-{i}")
    client.admit("charge", "refund-1", queue="payments")
    assert client.get("refund-1")["queue"] == "payments"
    charges.start()
    emails.start()
    eventually("every execution completed", lambda: len(ran) == 41)
    charges.stop()
    emails.stop()
    assert all(ran[f"c-{i}"] == "charges" and ran[f"e-{i}"] == "emails" for i in range(20)), ran
    assert ran["refund-1"] == "charges"
    assert not [e for e in events if e[1] == "noHandler"], events
