"""The Worker against the real binary: every execution completes once with its
steps run once, a lost lease stops the delivery, a rejection releases it, and a
server killed with SIGKILL mid-run loses nothing."""

import threading

from conftest import eventually
from execstore_client import Client, ExitWithoutReply, Failure, Worker


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
