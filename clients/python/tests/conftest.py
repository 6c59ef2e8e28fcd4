"""The real binary, built from this repository and started by the tests on
127.0.0.1, on a port and a data directory of its own; and a fake server in
the test process, for answers the binary cannot be made to give (a batch
refused as a whole, one acknowledgement's NOT_LEADER, a Retry-After, a
claim's answer without its executions)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def binary(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("bin") / "execstore"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/execstore"], cwd=REPO, check=True)
    return str(out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server of the real binary: start, kill -9, start again on the same data."""

    def __init__(self, binary: str, extra: List[str]):
        self.binary = binary
        self.extra = extra
        self.addr = f"127.0.0.1:{_free_port()}"
        self.url = f"http://{self.addr}"
        self.data = tempfile.mkdtemp(prefix="execstore-data-")
        self.proc: subprocess.Popen | None = None

    def up(self) -> None:
        self.proc = subprocess.Popen([self.binary, "serve", "--data", self.data, "--addr", self.addr,
                                      "--log-level", "error", *self.extra])
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server at {self.url} did not start")
            time.sleep(0.02)

    def kill(self) -> None:
        """kill -9: no drain, no clean close."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.data, ignore_errors=True)


@pytest.fixture
def server(binary: str) -> Iterator[Server]:
    s = Server(binary, ["--nosync"])
    s.up()
    yield s
    s.stop()


@pytest.fixture
def make_server(binary: str) -> Iterator:
    made: List[Server] = []

    def make(*extra: str, env: dict | None = None) -> Server:
        s = Server(binary, list(extra))
        if env:
            old = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                s.up()
            finally:
                for k, v in old.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        else:
            s.up()
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def eventually(what: str, check, patience: float = 30.0) -> None:
    """Polls until check() holds, failing after patience: never an expectation about speed."""
    deadline = time.monotonic() + patience
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {patience} s: {what}")
        time.sleep(0.02)


Answer = Tuple[int, Any, Dict[str, str]]
"""A fake server's answer: status, JSON body and headers."""

Route = Callable[[str, str, Any], Optional[Answer]]
"""Answers a request (method, path, JSON body); None for the default answer."""


class FakeServer:
    """An execstore server in the test process, answering as route says.

    Without a route's answer: a claim answers no leases once waitMs passed (or
    the server closed), an acknowledgement is applied, a renewal renews, a
    release is taken. requests records each request, in order, with its
    time.monotonic()."""

    def __init__(self, route: Route):
        self.route = route
        self.requests: List[Tuple[float, str, str, Any]] = []
        self.closed = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake._lock:
                    fake.requests.append((time.monotonic(), self.command, self.path, body))
                status, out, headers = fake.route(self.command, self.path, body) or fake.default(self.command, self.path, body)
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def default(self, method: str, path: str, body: Any) -> Answer:
        if path in ("/v1/claims", "/v1/leases/acknowledge-and-claim"):
            self.closed.wait(body.get("waitMs", 0) / 1000)
            answer: Dict[str, Any] = {"leases": [], "now": NOW}
            if "acknowledgements" in body:
                answer["results"] = [applied(a) for a in body["acknowledgements"]]
            return 200, answer, {}
        if path == "/v1/leases/acknowledge-batch":
            return 200, {"results": [applied(a) for a in body["acknowledgements"]]}, {}
        if path == "/v1/leases/acknowledge":
            return 200, applied(body), {}
        if path == "/v1/leases/renew":
            return 200, {**body["lease"], "expiresAt": NOW}, {}
        if path == "/v1/leases/release":
            return 200, {"executionId": body["lease"]["executionId"], "status": "admitted"}, {}
        return 404, {"code": "ROUTE_NOT_FOUND", "message": path}, {}

    def paths(self, path: str) -> List[Any]:
        """The bodies of the requests to path, in order."""
        with self._lock:
            return [body for _, _, p, body in self.requests if p == path]

    def close(self) -> None:
        self.closed.set()
        self._server.shutdown()
        self._server.server_close()


NOW = "2026-01-02T12:00:00Z"


def lease(execution_id: str, token: int = 1) -> Dict[str, Any]:
    return {"executionId": execution_id, "token": token, "expiresAt": NOW}


def execution(execution_id: str, workflow_id: str, params: Any = None, token: int = 1) -> Dict[str, Any]:
    """A claim's execution, as withExecutions answers it."""
    out: Dict[str, Any] = {"executionId": execution_id, "workflowId": workflow_id, "attempt": token,
                           "maxAttempts": 0, "steps": []}
    if params is not None:
        out["params"] = params
    return out


def applied(ack: Dict[str, Any]) -> Dict[str, Any]:
    """An acknowledgement's answer when it was applied."""
    eid = ack["lease"]["executionId"]
    return {"executionId": eid, "workflowId": "w", "status": ack["outcome"]["status"], "outcome": ack["outcome"],
            "admittedAt": NOW, "updatedAt": NOW, "attempts": 1, "maxAttempts": 0, "applied": True}


def acked_ids(body: Any) -> List[str]:
    """The executions a request's body acknowledges."""
    if body is None:
        return []
    if "acknowledgements" in body:
        return [a["lease"]["executionId"] for a in body["acknowledgements"]]
    if "outcome" in body:
        return [body["lease"]["executionId"]]
    return []


@pytest.fixture
def fake() -> Iterator[Callable[[Route], FakeServer]]:
    made: List[FakeServer] = []

    def make(route: Route) -> FakeServer:
        s = FakeServer(route)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
