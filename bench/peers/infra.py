"""Processes, servers, databases and virtual environments for the peer benchmark (stdlib only).

Every process the run starts goes through :class:`Procs`: each gets its own process group (so
the whole tree - Celery's pool children, Huey's and Dramatiq's worker processes - is signalled
together) and a parent-death signal, and :meth:`Procs.stop_all` ends what is left on exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(OSError):  # PR_SET_PDEATHSIG: SIGTERM when the harness dies
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: IO[bytes]


class Procs:
    """The processes of one run, each leading its own process group."""

    def __init__(self) -> None:
        self._procs: list[Proc] = []

    def spawn(
        self,
        name: str,
        cmd: list[str],
        *,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Proc:
        out = log.open("ab")
        popen = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509  (the harness has no threads)
        )
        proc = Proc(name, popen, out)
        self._procs.append(proc)
        return proc

    def stop(self, proc: Proc, timeout: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL what is still there after ``timeout``."""
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.popen.wait(wait)
                os.killpg(proc.popen.pid, signal.SIGKILL)  # stragglers left in the group
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                pass
            break
        proc.log.close()
        if proc in self._procs:
            self._procs.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(list(self._procs)):
            self.stop(proc, timeout=5.0)


def exit_on_signals() -> None:
    """Turn SIGTERM/SIGHUP into SystemExit and SIGINT into KeyboardInterrupt, so that the
    ``finally`` blocks stop every process and drop the database."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored


def redis_command(port: int, *words: str) -> bytes:
    """One command over raw RESP; returns the first reply line."""
    payload = b"*%d\r\n" % len(words) + b"".join(
        b"$%d\r\n%s\r\n" % (len(w.encode()), w.encode()) for w in words
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        return s.recv(4096).split(b"\r\n", 1)[0]


@contextmanager
def redis_server(procs: Procs, out_dir: Path) -> Iterator[int]:
    """A private redis-server on a free port, no persistence; yields the port."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server not found (Debian: apt-get install redis-server)")
    port = free_port()
    cmd = [
        exe,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(out_dir),
    ]
    proc = procs.spawn("redis", cmd, log=out_dir / "redis.log")
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                if redis_command(port, "PING") == b"+PONG":
                    break
            except OSError as exc:
                if time.monotonic() > deadline or proc.popen.poll() is not None:
                    msg = f"redis-server did not start; see {out_dir}/redis.log"
                    raise SystemExit(msg) from exc
                time.sleep(0.05)
        yield port
    finally:
        procs.stop(proc)


def psql(host: str, port: int, user: str, sql: str, dbname: str = "postgres") -> str:
    cmd = [
        "psql",
        "-h",
        host,
        "-p",
        str(port),
        "-U",
        user,
        "-d",
        dbname,
        "-X",
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        sql,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"psql failed: {done.stderr.strip()}")
    return done.stdout.strip()


@contextmanager
def pg_database(host: str, port: int, user: str, name: str) -> Iterator[None]:
    """CREATE a fresh database and DROP it (WITH FORCE) afterwards, whatever happened."""
    psql(host, port, user, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    psql(host, port, user, f'CREATE DATABASE "{name}"')
    if os.environ.get("PEERBENCH_PG_LOG_STATEMENTS"):  # every statement in the server log
        psql(host, port, user, f"ALTER DATABASE \"{name}\" SET log_statement = 'all'")
    try:
        yield
    finally:
        psql(host, port, user, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def ensure_venv(root: Path, name: str, pins: tuple[str, ...], log: Path) -> Path:
    """``root/name`` with exactly ``pins`` installed; reused when its stamp matches (for a
    local project among the pins, ``-e <dir>``, that includes its pyproject.toml: a new
    dependency rebuilds the venv)."""
    venv = root / name
    stamp = venv / "peerbench-pins.txt"
    projects = [Path(p) / "pyproject.toml" for p in pins if (Path(p) / "pyproject.toml").is_file()]
    digests = [f"{p} {hashlib.sha256(p.read_bytes()).hexdigest()}" for p in projects]
    wanted = "\n".join([f"python {sys.version.split()[0]}", *pins, *digests]) + "\n"
    python = venv / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        for cmd in (
            [sys.executable, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins],
        ):
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode:
                raise RuntimeError(f"{' '.join(cmd)} failed; see {log}")
    stamp.write_text(wanted)
    return venv


def venv_packages(venv: Path) -> dict[str, str]:
    """Every distribution installed in ``venv`` (editable ones too), name -> version."""
    code = (
        "import importlib.metadata as m, json; print(json.dumps("
        "{d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    )
    cmd = [str(venv / "bin" / "python"), "-c", code]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    packages: dict[str, str] = json.loads(out)
    return dict(sorted(packages.items()))
