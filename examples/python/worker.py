#!/usr/bin/env python3
"""A worker for `execstore serve`, in Python with the standard library alone,
on the package in clients/python (execstore_client).

It triggers an execution (and once more, as a client that lost the first
answer would), runs a Worker that claims it, charges the order in a step
that a rerun skips, and completes it; then it waits for the outcome.

    python3 examples/python/worker.py http://127.0.0.1:7070 [EXECUTION_ID]
"""

import json
import sys
from pathlib import Path

# The package from this repository, without installing it
# (`pip install clients/python` installs it instead).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python" / "src"))

from execstore_client import Client, ExecutionIdConflictError, Failure, Worker  # noqa: E402


def compact(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def charge_order(ctx):
    """The workflow: one step, saved once; a rerun after a crash skips it."""
    if ctx.params["total"] <= 0:
        raise Failure(f"order {ctx.params['order']} has nothing to charge", code="EMPTY_ORDER")
    receipt = ctx.step("charge", lambda: {"receipt": f"r-order-{ctx.params['order']}"})
    print(f"ran {ctx.execution_id} (delivery {ctx.attempt}): step charge kept {compact(receipt)}")
    return receipt


def main():
    base = sys.argv[1].rstrip("/")
    execution_id = sys.argv[2] if len(sys.argv) > 2 else "order-7"
    client = Client(base)

    # Trigger, then trigger again: an ID is admitted once, ever. The conflict
    # says whether the execution holding the ID has this very event.
    event = dict(workflow_id="charge-order", execution_id=execution_id,
                 params={"order": 7, "total": 16}, context={"tenant": "shop"})
    client.admit(**event)
    print(f"trigger {execution_id}: admitted")
    try:
        client.admit(**event)
    except ExecutionIdConflictError as err:
        print(f"trigger {execution_id} again: {err.status} {err.code} sameEvent={str(err.same_event).lower()}")

    # The worker claims, renews, runs and acknowledges; one request a round.
    worker = Worker(client, {"charge-order": charge_order}, concurrency=4,
                    on_outcome=lambda eid, outcome: print(f"acknowledged {eid}: {outcome['status']}"))
    worker.start()
    final = client.wait(execution_id, timeout=30)
    worker.stop()
    print(f"outcome of {execution_id}: {final['outcome']['status']} {compact(final['outcome']['result'])}")


if __name__ == "__main__":
    main()
