#!/usr/bin/env python3
"""A worker for `execstore serve`, in Python with the standard library alone.

It triggers an execution (and once more, as a client that lost the first
answer would), claims it under a lease, runs it, saves a step, and
acknowledges it; each answer is checked against openapi.yaml's contract.

    python3 examples/python/worker.py http://127.0.0.1:7070 [EXECUTION_ID]
"""

import json
import sys
import time
import urllib.error
import urllib.request


def call(base, method, path, body=None):
    """Sends one request; returns (status, decoded JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:  # 4xx and 5xx carry {"code", "message"}
        return err.code, json.load(err)


def expect(answer, status, what):
    got, body = answer
    if got != status:
        sys.exit(f"{what}: answered {got} {body}, want {status}")
    return body


def compact(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def charge(params):
    """The workflow's work: here, a receipt for the order."""
    return {"receipt": f"r-order-{params['order']}"}


def main():
    base = sys.argv[1].rstrip("/")
    execution_id = sys.argv[2] if len(sys.argv) > 2 else "order-7"
    event = {"executionId": execution_id, "workflowId": "charge-order",
             "params": {"order": 7, "total": 16}, "context": {"tenant": "shop"}}

    # Trigger, then trigger again: an ID is admitted once, ever. The 409
    # says whether the execution holding the ID has this very event.
    expect(call(base, "POST", "/v1/executions", event), 201, "trigger")
    print(f"trigger {execution_id}: admitted")
    conflict = expect(call(base, "POST", "/v1/executions", event), 409, "trigger again")
    print(f"trigger {execution_id} again: 409 {conflict['code']} sameEvent={str(conflict['sameEvent']).lower()}")

    # Claim until our execution comes up (other executions may be due too).
    lease = None
    for _ in range(100):
        claimed = expect(call(base, "POST", "/v1/claims", {"limit": 10, "leaseDurationMs": 30000}), 200, "claim")
        for candidate in claimed["leases"]:
            if candidate["executionId"] == execution_id:
                lease = candidate
            else:  # not ours: hand it back at once
                expect(call(base, "POST", "/v1/leases/release", {"lease": candidate, "retryAfterMs": 0}), 200, "release")
        if lease:
            break
        time.sleep(0.05)
    if lease is None:
        sys.exit(f"{execution_id} was never claimed")
    print(f"claimed {execution_id} with token {lease['token']}")

    # Run: the event comes from the record; a step saved under the lease is
    # what a rerun would find, and the first value saved is the one kept.
    record = expect(call(base, "GET", f"/v1/executions/{execution_id}"), 200, "get")
    receipt = charge(record["params"])
    saved = expect(call(base, "POST", "/v1/leases/steps", {"lease": lease, "key": "charge", "value": receipt}), 200, "save step")
    print(f"step charge: applied={str(saved['applied']).lower()}")
    again = expect(call(base, "POST", "/v1/leases/steps", {"lease": lease, "key": "charge", "value": {"receipt": "other"}}), 200, "save step again")
    print(f"step charge again: applied={str(again['applied']).lower()} kept={compact(again['value'])}")

    # Acknowledge. A repeat (a retry after a lost answer) changes nothing and
    # answers the recorded outcome with applied=false.
    outcome = {"status": "completed", "result": receipt}
    done = expect(call(base, "POST", "/v1/leases/acknowledge", {"lease": lease, "outcome": outcome}), 200, "acknowledge")
    print(f"acknowledged: status={done['status']} applied={str(done['applied']).lower()}")
    repeat = expect(call(base, "POST", "/v1/leases/acknowledge", {"lease": lease, "outcome": {"status": "suspended"}}), 200, "acknowledge again")
    print(f"acknowledged again: status={repeat['status']} applied={str(repeat['applied']).lower()}")

    final = expect(call(base, "GET", f"/v1/executions/{execution_id}/await?timeout=5s"), 200, "await")
    print(f"outcome of {execution_id}: {final['outcome']['status']} {compact(final['outcome']['result'])}")


if __name__ == "__main__":
    main()
