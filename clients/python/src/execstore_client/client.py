"""A client for every route of execstore's HTTP API, on the standard library."""

from __future__ import annotations

import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Sequence

from .errors import ExecutionIdConflictError, NetworkError, UnavailableError, error_of

JSON = Any
Lease = Dict[str, Any]
Outcome = Dict[str, Any]

# Whether a request may be sent again when its answer did not come back or
# said the store was unavailable: ALWAYS when it changes nothing or a repeat
# answers as the first did (reads; an acknowledgement or step save, which the
# server answers as a replay; a renewal; a cancel; a child start by step
# key); NOT_LEADER only when the server said no leader took it, since a
# repeat could do it twice or lose what the first did (a claim, whose leases
# would be stranded; a release; a store commit).
ALWAYS, NOT_LEADER = "always", "notLeader"


def lease_ref(lease: Lease) -> Lease:
    """A lease as the server reads it back: the execution and the token name it."""
    return {"executionId": lease["executionId"], "token": lease["token"]}


def _acks(acks: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [{"lease": lease_ref(a["lease"]), "outcome": a["outcome"]} for a in acks]


def _iso(at: Any) -> str:
    """A time as the server reads it: UTC, to the millisecond. A naive
    datetime is local time, as everywhere in Python (datetime.astimezone)."""
    if isinstance(at, datetime):
        return at.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(at)


def _q(path: str) -> str:
    return urllib.parse.quote(path, safe="")


class Client:
    """A client of one execstore server.

    Every method returns the decoded JSON answer and raises an ExecstoreError
    subclass for an error answer, NetworkError when none came back.
    """

    def __init__(self, base_url: str, token: Optional[str] = None, attempts: int = 5,
                 retry_base_delay: float = 0.1, retry_max_delay: float = 2.0, timeout: float = 75.0,
                 on_request: Optional[Callable[[str, str], None]] = None):
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.attempts = attempts
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.timeout = timeout
        self.on_request = on_request

    # Executions.

    def admit(self, workflow_id: str, execution_id: Optional[str] = None, params: JSON = None,
              context: Optional[Dict[str, str]] = None, max_attempts: Optional[int] = None,
              queue: Optional[str] = None, priority: Optional[int] = None,
              deadline: Optional[str] = None, concurrency_key: Optional[str] = None) -> Dict[str, Any]:
        """Admits an execution once, ever; a repeat raises ExecutionIdConflictError.

        priority, 1 (claimed first) to 5, orders the claims of its queue; left
        out, 3. deadline (RFC 3339): past it, the execution fails with
        DEADLINE_EXCEEDED unless it has ended. concurrency_key (1 to 200 bytes:
        a customer, a tenant): in a queue with a key limit, at most that many
        executions of the key hold a slot at once; the others wait in the order
        they became due.

        After a retry of this very call, a conflict whose same_event is true
        means the first attempt was admitted, and admit answers as if this one
        had been.
        """
        body: Dict[str, Any] = {"workflowId": workflow_id}
        if execution_id is not None:
            body["executionId"] = execution_id
        if params is not None:
            body["params"] = params
        if context is not None:
            body["context"] = context
        if max_attempts is not None:
            body["maxAttempts"] = max_attempts
        if queue is not None:
            body["queue"] = queue  # left out: the workflow's own queue
        if priority is not None:
            body["priority"] = priority
        if deadline is not None:
            body["deadline"] = deadline
        if concurrency_key is not None:
            body["concurrencyKey"] = concurrency_key
        sent = [0]
        try:
            return self._call("POST", "/v1/executions", body, ALWAYS if execution_id is not None else NOT_LEADER, sent)
        except ExecutionIdConflictError as err:
            if err.same_event and sent[0] > 1 and execution_id is not None:
                return {"executionId": execution_id}
            raise

    def get(self, execution_id: str) -> Dict[str, Any]:
        return self._call("GET", f"/v1/executions/{_q(execution_id)}")

    def wait(self, execution_id: str, timeout: float = 60.0) -> Dict[str, Any]:
        """Waits up to timeout seconds (at most 60) for the execution to be terminal (GET .../await)."""
        return self._call("GET", f"/v1/executions/{_q(execution_id)}/await?timeout={int(timeout * 1000)}ms")

    def list(self, **query: Any) -> Dict[str, Any]:
        return self._call("GET", "/v1/executions" + self._query(query))

    def list_archived(self, **query: Any) -> Dict[str, Any]:
        """Archived executions (a server run with --archive) in the order they ended: workflowId, status,
        endedAfter, endedBefore, limit, cursor (GET /v1/archive)."""
        return self._call("GET", "/v1/archive" + self._query(query))

    def wake(self, execution_id: str, at: Any) -> Dict[str, Any]:
        return self._call("POST", f"/v1/executions/{_q(execution_id)}/wakes", {"at": _iso(at)})

    def watch(self, execution_id: str, keys: Sequence[str]) -> Dict[str, Any]:
        return self._call("POST", f"/v1/executions/{_q(execution_id)}/watches", {"keys": list(keys)})

    def cancel(self, execution_id: str, reason: str) -> Dict[str, Any]:
        return self._call("POST", f"/v1/executions/{_q(execution_id)}/cancel", {"reason": reason})

    def list_steps(self, execution_id: str, after: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        return self._call("GET", f"/v1/executions/{_q(execution_id)}/steps" + self._query({"after": after, "limit": limit}))

    def step(self, execution_id: str, key: str) -> Dict[str, Any]:
        """{"saved": True, "value": ...}, or {"saved": False} when the key has none yet."""
        return self._call("GET", f"/v1/executions/{_q(execution_id)}/steps/{_q(key)}")

    # Delivery.

    def claim(self, limit: int, lease_duration_ms: int, with_executions: bool = False, wait_ms: int = 0,
              request_key: Optional[str] = None, queues: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Leases up to limit due executions (of the named queues only, when queues is given;
        an execution's queue is by default its workflow ID). With a request_key (a new random one per claim,
        e.g. uuid4().hex) a repeat answers the same leases, so the call is repeated after a lost
        answer too; without one, only when no leader took it (a repeat would strand its leases)."""
        body = self._claim(limit, lease_duration_ms, with_executions, wait_ms, request_key, queues)
        return self._call("POST", "/v1/claims", body, ALWAYS if request_key else NOT_LEADER)

    def renew(self, lease: Lease, lease_duration_ms: int) -> Lease:
        return self._call("POST", "/v1/leases/renew", {"lease": lease_ref(lease), "leaseDurationMs": lease_duration_ms})

    def release(self, lease: Lease, retry_after_ms: int, error: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"lease": lease_ref(lease), "retryAfterMs": retry_after_ms}
        if error is not None:
            body["error"] = error
        return self._call("POST", "/v1/leases/release", body, NOT_LEADER)

    def acknowledge(self, lease: Lease, outcome: Outcome) -> Dict[str, Any]:
        """Records how a delivery ended; a repeat after a lost answer answers applied and replayed."""
        return self._call("POST", "/v1/leases/acknowledge", {"lease": lease_ref(lease), "outcome": outcome})

    def acknowledge_batch(self, acks: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
        return self._call("POST", "/v1/leases/acknowledge-batch", {"acknowledgements": _acks(acks)})["results"]

    def acknowledge_and_claim(self, acks: Sequence[Dict[str, Any]], limit: int, lease_duration_ms: int,
                              with_executions: bool = False, wait_ms: int = 0,
                              request_key: Optional[str] = None, queues: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Acknowledges deliveries and claims more in one write of the log; repeated after a lost
        answer only with a request_key, as claim is."""
        body = {"acknowledgements": _acks(acks), **self._claim(limit, lease_duration_ms, with_executions, wait_ms, request_key, queues)}
        return self._call("POST", "/v1/leases/acknowledge-and-claim", body, ALWAYS if request_key else NOT_LEADER)

    def save_step(self, lease: Lease, key: str, value: JSON) -> Dict[str, Any]:
        """Saves a step's value; {"applied", "replayed"?, "value"}: the value kept is the first one saved."""
        return self._call("POST", "/v1/leases/steps", {"lease": lease_ref(lease), "key": key, "value": value})

    def start(self, lease: Lease, step_key: str, workflow_id: str, params: JSON = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"lease": lease_ref(lease), "stepKey": step_key, "workflowId": workflow_id}
        if params is not None:
            body["params"] = params
        return self._call("POST", "/v1/leases/start", body)

    def check_outcome(self, outcome: Outcome) -> Dict[str, Any]:
        return self._call("POST", "/v1/outcomes/check", {"outcome": outcome})

    # The key-value store, schedules and operations.

    def commit(self, writes: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
        return self._call("POST", "/v1/store/commit", {"writes": list(writes)}, NOT_LEADER)

    def read(self, key: str) -> Dict[str, Any]:
        return self._call("GET", f"/v1/store/{_q(key)}")

    def put_schedule(self, schedule_id: str, schedule: Dict[str, Any]) -> Dict[str, Any]:
        return self._call("PUT", f"/v1/schedules/{_q(schedule_id)}", schedule)

    def get_schedule(self, schedule_id: str) -> Dict[str, Any]:
        return self._call("GET", f"/v1/schedules/{_q(schedule_id)}")

    def delete_schedule(self, schedule_id: str) -> Dict[str, Any]:
        return self._call("DELETE", f"/v1/schedules/{_q(schedule_id)}", None, NOT_LEADER)

    def list_schedules(self) -> Dict[str, Any]:
        return self._call("GET", "/v1/schedules")

    def put_queue(self, name: str, concurrency: int = 0, paused: bool = False,
                  rate: int = 0, rate_period_ms: int = 0, key_limit: int = 0,
                  key_mode: Optional[str] = None) -> Dict[str, Any]:
        """Sets a queue's concurrency limit (0: none), its rate limit (at most `rate` leases
        granted in any window of `rate_period_ms`; 0: none), its key limit (at most `key_limit`
        executions of one concurrency key holding a slot at once, "leased" by default or "live";
        0: none) and its pause, and answers the queue with its counts; an identical put writes
        nothing, so it is repeated after a lost answer."""
        body: Dict[str, Any] = {"concurrency": concurrency, "paused": paused}
        if rate or rate_period_ms:
            body["rate"], body["ratePeriodMs"] = rate, rate_period_ms
        if key_limit:
            body["keyLimit"] = key_limit
        if key_mode is not None:
            body["keyMode"] = key_mode
        return self._call("PUT", f"/v1/queues/{_q(name)}", body)

    def queue_keys(self, name: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """A queue's concurrency keys, the most waiting first: each with the executions
        holding a slot, ready and parked (waiting for one)."""
        return self._call("GET", f"/v1/queues/{_q(name)}/keys" + self._query({"limit": limit}))["keys"]

    def get_queue(self, name: str) -> Dict[str, Any]:
        """A queue's settings and counts; any name is a queue, empty or not."""
        return self._call("GET", f"/v1/queues/{_q(name)}")

    def delete_queue(self, name: str) -> Dict[str, Any]:
        """Removes a queue's settings (no limit, not paused); a queue without any answers the same."""
        return self._call("DELETE", f"/v1/queues/{_q(name)}")

    def list_queues(self, after: Optional[str] = None) -> Dict[str, Any]:
        """The queues with settings or live executions, in name order, a page of 1000."""
        return self._call("GET", "/v1/queues" + self._query({"after": after}))

    def changes(self, after: Optional[int] = None, limit: Optional[int] = None, wait: Optional[str] = None) -> Dict[str, Any]:
        return self._call("GET", "/v1/changes" + self._query({"after": after, "limit": limit, "wait": wait}))

    def stats(self) -> Dict[str, Any]:
        return self._call("GET", "/v1/stats")

    def health(self) -> Dict[str, Any]:
        return self._call("GET", "/healthz")

    def cluster(self) -> Dict[str, Any]:
        return self._call("GET", "/v1/cluster")

    # Plumbing.

    @staticmethod
    def _claim(limit: int, lease_duration_ms: int, with_executions: bool, wait_ms: int,
               request_key: Optional[str], queues: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"limit": limit, "leaseDurationMs": int(lease_duration_ms)}
        if with_executions:
            body["withExecutions"] = True
        if wait_ms:
            body["waitMs"] = int(wait_ms)
        if request_key is not None:
            body["requestKey"] = request_key
        if queues:
            body["queues"] = list(queues)
        return body

    @staticmethod
    def _query(q: Dict[str, Any]) -> str:
        items = {k: str(v) for k, v in q.items() if v is not None and v != ""}
        return "?" + urllib.parse.urlencode(items) if items else ""

    def _backoff(self, n: int) -> float:
        return min(self.retry_max_delay, self.retry_base_delay * 2 ** (n - 1)) * (0.5 + random.random() / 2)

    def _call(self, method: str, path: str, body: Any = None, retry: str = ALWAYS, sent: Optional[List[int]] = None) -> Any:
        """Sends one request, repeating it as retry allows after a network error or a 503."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        n = 0
        while True:
            n += 1
            if sent is not None:
                sent[0] += 1
            if self.on_request:
                self.on_request(method, path)
            req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.load(resp)
            except urllib.error.HTTPError as http_err:
                try:
                    err_body = json.load(http_err)
                except ValueError:
                    err_body = {"code": "INTERNAL" if http_err.code >= 500 else "INVALID_ARGUMENT",
                                "message": f"HTTP {http_err.code}"}
                retry_after = http_err.headers.get("Retry-After")
                err = error_of(http_err.code, err_body, float(retry_after) if retry_after and retry_after.isdigit() else None)
                may_repeat = isinstance(err, UnavailableError) and (retry == ALWAYS or err.code == "NOT_LEADER")
                if not may_repeat or n >= self.attempts:
                    raise err from None
                time.sleep(err.retry_after if err.retry_after is not None else self._backoff(n))
            except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError, http.client.HTTPException) as net:
                if retry != ALWAYS or n >= self.attempts:
                    raise NetworkError(f"{method} {path}: {net}") from net
                time.sleep(self._backoff(n))

