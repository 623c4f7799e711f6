"""A distributed tickwork cluster of real processes, for the acceptance tests.

A private PostgreSQL and a private Redis (each on a free port, so that a test may stop,
restart or flush them without touching the shared servers), then ``tickwork db upgrade``,
scheduler replicas, workers and one API, every one started through the CLI in a process
group of its own, with its output in a log file under the test's ``tmp_path``.

Each process connects to PostgreSQL with its own ``application_name`` (``PGAPPNAME``, which
libpq reads), so the audit trigger of ``tests/e2e/audit.py`` records which process made each
write.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import redis

from tests.e2e import audit
from tests.e2e.conftest import free_port, wait_for
from tests.pg import ThrowawayPostgres
from tests.redis_server import PrivateRedis
from tickwork.coordination import open_leases
from tickwork.sdk import Client

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
LOG_TAIL = 60  # lines of each log shown when a test fails
_DELAYED = "{tickwork}:delayed:*"
_STREAMS = "{tickwork}:stream:*"


@dataclass(frozen=True, slots=True)
class Timings:
    """Short settings, so that failovers and zombie sweeps happen within seconds."""

    lease_ttl: float = 3.0
    heartbeat_timeout: float = 5.0
    window: float = 2.0  # seconds of work handed to Redis ahead of time
    concurrency: int = 2
    grace: float = 2.0

    def env(self) -> dict[str, str]:
        return {
            "TICKWORK_LEASE_TTL": str(self.lease_ttl),
            "TICKWORK_HEARTBEAT_TIMEOUT": str(self.heartbeat_timeout),
            "TICKWORK_WINDOW": str(self.window),
            "TICKWORK_CONCURRENCY": str(self.concurrency),
            "TICKWORK_GRACE": str(self.grace),
        }


@dataclass
class Proc:
    """One tickwork process, in a process group of its own, its output in ``log``."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=REPO,
                start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was never started"
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def send(self, sig: signal.Signals) -> None:
        """``kill -SIG pid``: the process only (its shell tasks have sessions of their own)."""
        os.kill(self.pid, sig)

    def kill9(self) -> None:
        self.send(signal.SIGKILL)
        assert self.popen is not None
        self.popen.wait(10)

    def halt(self) -> None:
        """Teardown: SIGKILL the whole group (stopped or not) and reap it."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait(10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def holder_pid(holder: str) -> int:
    """The pid in a lease holder's name (``host:pid:random``)."""
    return int(holder.rsplit(":", 2)[1])


@dataclass
class Cluster:
    """PostgreSQL, Redis and the tickwork processes of one test."""

    root: Path
    pg: ThrowawayPostgres
    redis: PrivateRedis
    timings: Timings = field(default_factory=Timings)
    procs: list[Proc] = field(default_factory=list)
    api_port: int = field(default_factory=free_port)
    #: More TICKWORK_* settings for every process: another broker or coordination URL.
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def db_url(self) -> str:
        return self.pg.url

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.jsonl"

    def env(self, app: str = "tickwork-test") -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
        return env | self.timings.env() | {
            "TICKWORK_DATABASE_URL": self.db_url,
            "TICKWORK_REDIS_URL": self.redis.url,
            "TICKWORK_DATA_DIR": str(self.data_dir),
            "TICKWORK_URL": self.api_url,
            "PGAPPNAME": app,
            "PYTHONPATH": str(REPO),  # python tasks import tests.fixtures.ledger_tasks
            "PYTHONUNBUFFERED": "1",
        } | self.extra_env  # fmt: skip

    # -- processes --------------------------------------------------------------------------

    def spawn(self, name: str, *args: str) -> Proc:
        # The process learns its own pid from LEDGER_WORKER_PID (``$$`` is the shell's pid,
        # which ``exec`` hands on to tickwork), and its tasks inherit it: a task started just
        # as its worker was killed has no other way to know which worker ran it.
        argv = ["/bin/sh", "-c", 'export LEDGER_WORKER_PID=$$; exec "$0" "$@"']
        argv += [str(BIN / "tickwork"), *args]
        proc = Proc(name, argv, self.env(name), self.root / f"{name}.log")
        proc.start()
        self.procs.append(proc)
        return proc

    def start(self, schedulers: int = 3, workers: int = 3) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.cli("db", "upgrade")
        audit.install(self.sql)
        for i in range(schedulers):
            self.spawn(f"scheduler-{i}", "scheduler")
        for i in range(workers):
            self.spawn(f"worker-{i}", "worker", "--queues", "default")
        self.spawn("api", "api", "--port", str(self.api_port))
        wait_for(self._startup, lambda missing: not missing, timeout=60, interval=0.2)

    def _startup(self) -> list[str]:
        """What is not up yet (empty when the API answers, a leader leads, workers work)."""
        dead = [p.name for p in self.procs if not p.alive()]
        assert not dead, f"exited during startup: {dead}\n{self.report()}"
        missing = []
        if not self._api_answers():
            missing.append("api")
        if self.lease() is None:
            missing.append("leader")
        registered = self.sql(
            "SELECT count(*) FROM workers WHERE stopped_at IS NULL AND kind = 'worker'"
        )[0][0]
        if registered < len(self.of_kind("worker")):
            missing.append(f"workers ({registered} registered)")
        return missing

    def _api_answers(self) -> bool:
        try:
            return httpx2.get(f"{self.api_url}/healthz", timeout=1).status_code == 200
        except httpx2.HTTPError:
            return False

    def of_kind(self, kind: str) -> list[Proc]:
        return [p for p in self.procs if p.name.startswith(f"{kind}-")]

    def by_pid(self, pid: int) -> Proc:
        (proc,) = [p for p in self.procs if p.popen is not None and p.pid == pid]
        return proc

    def close(self) -> None:
        for proc in self.procs:
            proc.halt()
        self.pg.stop()
        self.redis.close()

    # -- clients ----------------------------------------------------------------------------

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(BIN / "tickwork"), *args], capture_output=True, text=True, check=False,
            env=self.env("tickwork-cli") | {"COLUMNS": "200"}, cwd=self.root, timeout=timeout,
        )  # fmt: skip
        assert done.returncode == 0, f"tickwork {' '.join(args)}: {done.stderr}{done.stdout}"
        return done

    def status(self) -> dict[str, Any]:
        """``tickwork status -o json``: the leader, its epoch, workers, queue depths."""
        found: dict[str, Any] = json.loads(self.cli("status", "-o", "json").stdout)
        return found

    def leader(self) -> tuple[Proc, int]:
        """The leading scheduler process (found with ``tickwork status``) and its epoch."""
        leader = self.status()["leader"]
        assert leader is not None and leader["live"], f"no live leader: {leader}"
        return self.by_pid(holder_pid(leader["holder"])), int(leader["epoch"])

    def client(self) -> Client:
        token = (self.data_dir / "admin.token").read_text().strip()
        return Client(self.api_url, token=token, timeout=30)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.db_url, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(query, params or None)
            return cursor.fetchall() if cursor.description else []

    def lease(self) -> tuple[str, int, datetime] | None:
        """The live scheduler lease (holder, epoch, acquired_at), by PostgreSQL's clock (or
        as etcd or ZooKeeper hold it, with a coordination URL)."""
        if coordination := self.extra_env.get("TICKWORK_COORDINATION_URL"):
            return asyncio.run(_external_lease(coordination))
        rows = self.sql(
            "SELECT holder, token, acquired_at FROM leases "
            "WHERE name = 'scheduler' AND expires_at > clock_timestamp()"
        )
        return (str(rows[0][0]), int(rows[0][1]), rows[0][2]) if rows else None

    def redis_counts(self) -> dict[str, int]:
        """Messages in Redis: ``delayed`` (handed out ahead), ``ready`` (in streams), keys."""
        client = redis.Redis.from_url(self.redis.url)
        try:
            delayed = sum(int(client.zcard(k)) for k in client.scan_iter(match=_DELAYED))
            ready = sum(int(client.xlen(k)) for k in client.scan_iter(match=_STREAMS))
            return {"delayed": delayed, "ready": ready, "keys": int(client.dbsize())}
        finally:
            client.close()

    # -- diagnosis --------------------------------------------------------------------------

    def report(self) -> str:
        """The tails of every log, for a failed test's report."""
        parts = [_tail(p.name, p.log_text()) for p in self.procs]
        parts.append(_tail("postgresql", _read(self.pg.log_path)))
        parts.append(_tail("redis", _read(self.redis.log_path)))
        parts.append(_tail("ledger", _read(self.ledger)))
        parts.append(_tail("task runs", self._task_runs()))
        return "\n".join(parts)

    def _task_runs(self) -> str:
        try:
            rows = self.sql(
                "SELECT job_name, logical_date, state, attempt, worker_id, error FROM task_runs "
                "ORDER BY job_name, logical_date"
            )
        except psycopg.Error as exc:
            return f"(PostgreSQL did not answer: {exc})"
        return "\n".join(" ".join(str(v) for v in row) for row in rows)


async def _external_lease(url: str) -> tuple[str, int, datetime] | None:
    leases = open_leases(url)
    try:
        lease = await leases.get_lease("scheduler")
    finally:
        await leases.close()
    return None if lease is None else (lease.holder, lease.token, lease.acquired_at)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        return f"({exc})"


def _tail(name: str, text: str) -> str:
    lines = text.splitlines()
    shown = "\n".join(lines[-LOG_TAIL:])
    return f"----- {name} (last {min(len(lines), LOG_TAIL)} of {len(lines)} lines) -----\n{shown}"
