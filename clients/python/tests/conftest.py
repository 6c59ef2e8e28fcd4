"""The real binary, built from this repository and started by the tests on
127.0.0.1, on a port and a data directory of its own."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List

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
