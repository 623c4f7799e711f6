"""A real `tickwork up` process and the real CLI, as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One `tickwork up` on a data dir; can be killed and started again on the same dir."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with (self.data_dir.parent / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "tickwork"), "up", "--data-dir", str(self.data_dir),
                 "--port", str(self.port), "--concurrency", "4"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.data_dir.parent,
            )  # fmt: skip
        deadline = time.monotonic() + 60  # a busy CI machine imports slowly
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_text()
            try:
                if httpx2.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.05)
        self.kill9()  # not left running after the test that started it
        raise AssertionError("tickwork up did not answer /healthz within 60 s")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def log_text(self) -> str:
        path = self.data_dir.parent / "server.log"
        return path.read_text() if path.exists() else ""


@dataclass
class Cli:
    url: str
    cwd: Path

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        # The CLI finds the admin token `tickwork up` wrote into its data dir.
        env = {**os.environ, "TICKWORK_URL": self.url, "COLUMNS": "200",
               "TICKWORK_DATA_DIR": str(self.cwd / "data")}  # fmt: skip
        done = subprocess.run(
            [str(BIN / "tickwork"), *args], capture_output=True, text=True, env=env, check=False,
            cwd=self.cwd, timeout=60,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, f"{args}: {done.stderr}"
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "data")
    srv.start()
    yield srv
    if srv.proc is not None and srv.proc.poll() is None:
        try:
            srv.stop()
        except subprocess.TimeoutExpired:
            srv.kill9()  # never left running; the test still fails
            raise


@pytest.fixture
def cli(server: Server, tmp_path: Path) -> Cli:
    return Cli(server.url, tmp_path)


def wait_for(probe: Any, ok: Any, timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll ``probe()`` every ``interval`` seconds until ``ok(value)``; fail with the last
    value at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout}s: {value!r}")
        time.sleep(interval)


#: What a test wants shown when it fails (the distributed tests: their processes' logs).
FAILURE_CONTEXT = pytest.StashKey[Callable[[], str]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    describe = item.stash.get(FAILURE_CONTEXT, None)
    if report.failed and describe is not None:
        report.sections.append((f"context of the failure ({report.when})", describe()))
    return report
