"""Redis for the tests: the shared server, or a private one a test starts, stops and flushes.

The shared server is ``TICKWORK_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``; make
test's ``scripts/services.sh`` starts it when it is down). Tests on it are isolated by a key
prefix of their own and never flush it. A test that restarts or flushes Redis starts a
``PrivateRedis`` from the installed ``redis-server`` on a free port instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DEFAULT_URL = "redis://127.0.0.1:6379/0"
ENV_VAR = "TICKWORK_TEST_REDIS_URL"


def shared_url() -> str:
    return os.environ.get(ENV_VAR, DEFAULT_URL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a Redis answers PING there (a raw inline command, no client needed)."""
    try:
        with socket.create_connection((host, port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class PrivateRedis:
    """A ``redis-server`` of our own: no persistence, so a restart comes back empty."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self._binary = binary
        self.port = free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="tickwork-redis-"))
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [self._binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(self._dir)]
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 10
        while not answers(self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on {self.port} did not start; see {self._dir}")
            time.sleep(0.02)  # polling a process that is starting, not synchronising tests

    @property
    def log_path(self) -> Path:
        return self._dir / "redis.log"

    def flushall(self) -> None:
        """Delete every key at once: streams, consumer groups, pending entries, delayed sets."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(b"FLUSHALL\r\n")
            reply = conn.recv(64)
        if not reply.startswith(b"+OK"):
            raise RuntimeError(f"FLUSHALL on {self.port} answered {reply!r}")

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(10)
            self._proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
