"""The client against the real binary: answers, typed errors, and what a retry gets;
and against a fake server, what a time goes as."""

import json
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from typing import Callable

import pytest

from conftest import FakeServer, Route, eventually
from execstore_client import (Client, ExecutionIdConflictError, InvalidArgumentError, LeaseLostError, LimitExceededError,
                              NotFoundError, UnauthorizedError, UnavailableError)


def test_admits_once_and_a_repeat_says_whether_it_is_the_same_event(server):
    client = Client(server.url)
    params = {"order": 42, "lines": [{"sku": "a-1", "qty": 2}]}
    assert client.admit("charge", "order-42", params) == {"executionId": "order-42"}
    with pytest.raises(ExecutionIdConflictError) as same:
        client.admit("charge", "order-42", params)
    assert same.value.same_event and same.value.status == 409
    with pytest.raises(ExecutionIdConflictError) as other:
        client.admit("charge", "order-42", {"order": 43})
    assert not other.value.same_event
    rec = client.get("order-42")
    assert rec["status"] == "admitted" and rec["params"] == params


def test_a_queues_settings_bound_its_claims_and_a_paused_queue_gives_nothing(server):
    client = Client(server.url)
    for i in range(3):
        client.admit("limited", f"lim-{i}")
    assert client.put_queue("limited", concurrency=1) == {
        "name": "limited", "concurrency": 1, "paused": False, "rate": 0, "ratePeriodMs": 0,
        "live": 3, "due": 3, "leased": 0, "expired": 0, "granted": 0, "keyLimit": 0, "parked": 0}
    assert len(client.claim(10, 30_000, queues=["limited"])["leases"]) == 1
    assert client.claim(10, 30_000, queues=["limited"])["leases"] == []
    client.put_queue("limited", concurrency=5, paused=True)
    assert client.claim(10, 30_000, queues=["limited"])["leases"] == []
    assert any(q["name"] == "limited" and q["paused"] and q["leased"] == 1 for q in client.list_queues()["queues"])
    client.delete_queue("limited")
    assert len(client.claim(10, 30_000, queues=["limited"])["leases"]) == 2
    with pytest.raises(InvalidArgumentError):
        client.put_queue("limited", concurrency=-1)


def test_a_queues_rate_limit_bounds_the_leases_granted_in_its_window(server):
    client = Client(server.url)
    for i in range(3):
        client.admit("rated", f"rate-{i}")
    q = client.put_queue("rated", rate=2, rate_period_ms=60_000)
    assert q["rate"] == 2 and q["ratePeriodMs"] == 60_000
    assert len(client.claim(10, 30_000, queues=["rated"])["leases"]) == 2
    assert client.claim(10, 30_000, queues=["rated"])["leases"] == []
    assert client.get_queue("rated")["granted"] == 2
    with pytest.raises(InvalidArgumentError):
        client.put_queue("rated", rate=2)


def test_a_queues_key_limit_runs_one_customers_executions_one_at_a_time(server):
    client = Client(server.url)
    client.put_queue("keyed", key_limit=1, key_mode="live")
    for i in range(3):
        client.admit("keyed", f"cust-a-{i}", concurrency_key="customer-a")
    client.admit("keyed", "cust-b-0", concurrency_key="customer-b")
    first = client.claim(10, 30_000, queues=["keyed"])["leases"]
    assert [lease["executionId"] for lease in first] == ["cust-a-0", "cust-b-0"]
    assert client.get("cust-a-1")["concurrencyKey"] == "customer-a"
    assert client.queue_keys("keyed") == [
        {"key": "customer-a", "holding": 1, "ready": 0, "parked": 2},
        {"key": "customer-b", "holding": 1, "ready": 0, "parked": 0}]
    client.acknowledge(first[0], {"status": "completed"})
    nxt = client.claim(10, 30_000, queues=["keyed"])["leases"]
    assert [lease["executionId"] for lease in nxt] == ["cust-a-1"]
    with pytest.raises(LimitExceededError) as bad:
        client.admit("keyed", "cust-bad", concurrency_key="x" * 201)
    assert bad.value.code == "LIMIT_EXCEEDED"


def test_a_claim_takes_higher_priorities_first(server):
    client = Client(server.url)
    client.admit("ranked", "rank-low", priority=5)
    client.admit("ranked", "rank-default")
    client.admit("ranked", "rank-high", priority=1)
    leases = client.claim(10, 30_000, queues=["ranked"])["leases"]
    assert [lease["executionId"] for lease in leases] == ["rank-high", "rank-default", "rank-low"]
    assert client.get("rank-high")["priority"] == 1 and "priority" not in client.get("rank-default")
    with pytest.raises(InvalidArgumentError) as bad:
        client.admit("ranked", "rank-bad", priority=6)
    assert bad.value.code == "INVALID_EXECUTION_EVENT"


def test_an_execution_past_its_deadline_fails(server):
    client = Client(server.url)
    client.admit("timed", "timed-1", deadline="2000-01-01T00:00:00Z")
    rec = client.wait("timed-1", timeout=10.0)
    assert rec["status"] == "failed" and rec["outcome"]["error"]["code"] == "DEADLINE_EXCEEDED"


def test_refuses_what_it_cannot_keep_with_typed_errors(server):
    client = Client(server.url)
    for bad in ("", ".", ".."):
        with pytest.raises(InvalidArgumentError):
            client.admit("w", bad)
    with pytest.raises(NotFoundError):
        client.get("nobody")


def test_a_delivery_with_executions_steps_replays_and_a_lost_lease(server):
    client = Client(server.url)
    client.admit("ship", "ship-1", {"to": "Lyon"}, {"tenant": "shop"})
    claimed = client.claim(10, 30000, with_executions=True)
    i = [l["executionId"] for l in claimed["leases"]].index("ship-1")
    lease, execution = claimed["leases"][i], claimed["executions"][i]
    assert execution["params"] == {"to": "Lyon"} and execution["context"] == {"tenant": "shop"}
    assert execution["steps"] == [] and execution["attempt"] == 1

    assert client.step("ship-1", "label") == {"saved": False}
    assert client.save_step(lease, "label", {"id": "L-1"}) == {"applied": True, "value": {"id": "L-1"}}
    assert client.save_step(lease, "label", {"id": "L-1"}) == {"applied": True, "replayed": True, "value": {"id": "L-1"}}
    assert client.save_step(lease, "label", {"id": "L-2"}) == {"applied": False, "value": {"id": "L-1"}}
    assert client.step("ship-1", "label") == {"saved": True, "value": {"id": "L-1"}}

    first = client.acknowledge(lease, {"status": "completed", "result": {"shipped": True}})
    assert first["applied"] and "replayed" not in first
    again = client.acknowledge(lease, {"status": "completed", "result": {"shipped": True}})
    assert again["applied"] and again["replayed"]
    other = client.acknowledge(lease, {"status": "completed", "result": {"shipped": False}})
    assert not other["applied"] and other["outcome"]["result"] == {"shipped": True}
    with pytest.raises(LeaseLostError):
        client.renew(lease, 1000)


def test_an_execution_past_the_retention_is_read_from_the_archive_and_listed_there(make_server):
    archiving = make_server("--nosync", "--retention", "1ms", "--archive")
    client = Client(archiving.url)
    client.admit("settle", "settle-1")
    lease = client.claim(1, 60000)["leases"][0]
    client.acknowledge(lease, {"status": "failed", "error": {"name": "Error", "message": "bank closed"}})
    # The server's retention check runs every second.
    eventually("settle-1 is archived",
               lambda: client.list_archived(workflowId="settle", status="failed")["records"] != [])
    page = client.list_archived(workflowId="settle", status="failed")
    assert [(r["executionId"], r["archived"]) for r in page["records"]] == [("settle-1", True)]
    assert page["cursor"] == ""
    record = client.get("settle-1")
    assert record["archived"] and record["status"] == "failed"
    assert client.list_archived(status="completed")["records"] == []
    with pytest.raises(ExecutionIdConflictError):
        client.admit("settle", "settle-1")


def test_a_server_with_a_token_refuses_a_client_without_it(make_server):
    token = "a-token-of-sixteen-bytes-or-more"
    guarded = make_server("--nosync", env={"EXECSTORE_TOKEN": token})
    with pytest.raises(UnauthorizedError):
        Client(guarded.url).stats()
    assert isinstance(Client(guarded.url, token=token).stats(), dict)


def test_a_naive_datetime_is_local_time_sent_as_utc_to_the_millisecond(
        fake: Callable[[Route], FakeServer], monkeypatch: pytest.MonkeyPatch) -> None:
    srv: FakeServer = fake(lambda method, path, body: (200, {"executionId": "x", "at": body["at"]}, {}))
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30, no daylight saving time
    time.tzset()
    try:
        client = Client(srv.url)
        client.wake("x", datetime(2026, 1, 2, 12, 0, 0, 123456))
        client.wake("x", datetime(2026, 1, 2, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-2))))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert [b["at"] for b in srv.paths("/v1/executions/x/wakes")] == ["2026-01-02T06:30:00.123Z", "2026-01-02T14:00:00.123Z"]


def test_a_claim_with_a_request_key_whose_answer_is_lost_is_repeated_and_answers_the_same_leases(server, fake):
    client = Client(server.url)
    client.admit("w", "lost-answer-1")
    client.admit("w", "lost-answer-2")
    forwarded = []

    def forward(method: str, path: str, body):
        req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def route(method: str, path: str, body):
        # The first claim reaches the server; its answer is lost on the way back.
        answer = forward(method, path, body)
        forwarded.append(answer)
        if len(forwarded) == 1:
            return 503, {"code": "OUTCOME_UNKNOWN", "message": "the answer was lost"}, {}
        return 200, answer, {}

    remote = Client(fake(route).url, retry_base_delay=0.001)
    got = remote.claim(2, 30000, request_key="python-test/round-1")
    assert len(forwarded) == 2, "the claim was sent twice"
    assert got["leases"] == forwarded[0]["leases"] and len(got["leases"]) == 2
    for lease in got["leases"]:
        assert client.get(lease["executionId"])["lease"]["token"] == lease["token"]
    # Without a key, a lost answer is not repeated: the error is the caller's.
    client.admit("w", "lost-answer-3")
    forwarded.clear()
    with pytest.raises(UnavailableError):
        remote.claim(1, 30000)
    assert len(forwarded) == 1
