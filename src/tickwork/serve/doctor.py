"""`tickwork doctor`: what is wrong with this installation, and what to do about it.

Each check reads one thing (the settings, the database and its schema revision, the broker,
the database's clock, the admin token file, the PostgreSQL server's settings) and says ok,
warn or fail, with the fix. The judgements are plain functions over what was read, so they
are tested without a badly configured server.
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from tickwork.app.settings import Settings
from tickwork.observe.logs import mask
from tickwork.ports import Store, WorkerInfo
from tickwork.serve.brokers import open_broker
from tickwork.serve.observed import broker_check
from tickwork.store import open_store
from tickwork.store.engine import PG_POOL_SIZE
from tickwork.store.facts import PARTITION_SCALE
from tickwork.store.migrate import head_revision
from tickwork.store.pg_direct import DIRECT_CONNECTIONS

Level = Literal["ok", "warn", "fail"]

#: Clock skew between this host and the database above which doctor warns (seconds).
MAX_SKEW = 1.0
#: max_wal_size below this (MB) is warned: PostgreSQL's default 1 GB logged "checkpoints are
#: occurring too frequently" under a bulk write of 1 M runs (bench/pg_sizing.py), and a
#: checkpoint every ~57,000 finished runs. deploy/README.md ("Sizing PostgreSQL") advises
#: ADVISED_WAL with ADVISED_CHECKPOINT_TIMEOUT; half of that is still fine.
MIN_WAL_MB = 4096
ADVISED_WAL = "8GB"
ADVISED_CHECKPOINT_TIMEOUT = "15min"
#: A hot partition (task_runs, runs) vacuumed only past this share of dead rows is warned;
#: deploy/README.md advises ADVISED_VACUUM_SCALE (PostgreSQL's default is 0.2).
MAX_VACUUM_SCALE = 0.05
ADVISED_VACUUM_SCALE = 0.02
#: Connections an API or worker process may hold: its pool, and the direct ones on its event
#: loop (the API's single enqueues; the worker's claims, heartbeats and completions).
DIRECT_POOLED = PG_POOL_SIZE + DIRECT_CONNECTIONS


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    level: Level
    message: str
    fix: str = ""


async def diagnose(settings: Settings, apis: int = 1) -> list[Finding]:
    """Every check, in order; later checks that need the database are skipped without it."""
    found = [config_finding(settings)]
    found += token_findings(settings.data_dir / "admin.token")
    distributed = settings.database_url.startswith("postgresql")
    try:
        store = await open_store(settings.effective_database_url)
    except Exception as exc:  # a URL the driver cannot even parse
        return [*found, Finding("database", "fail", mask(str(exc)), _DB_FIX)]
    try:
        found += await _database(store)
        if found[-1].level != "fail":
            found.append(await _skew(store))
            if distributed:
                facts = await store.server_facts()
                live = [w for w in await store.list_workers() if w.stopped_at is None]
                found += postgres_findings(facts, live, apis)
    finally:
        await store.close()
    if distributed:
        found.append(await _broker(settings))
    return found


_DB_FIX = "check TICKWORK_DATABASE_URL (postgresql://user:password@host:5432/db) and the server"


def config_finding(settings: Settings) -> Finding:
    mode = "distributed" if settings.database_url.startswith("postgresql") else "embedded"
    where = mask(settings.effective_database_url)
    return Finding("settings", "ok", f"{mode} mode; database {where}")


def token_findings(path: Path) -> list[Finding]:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return [Finding("token file", "ok", f"no {path} (tokens come from TICKWORK_TOKEN)")]
    if mode & 0o077:
        return [
            Finding(
                "token file",
                "warn",
                f"{path} is readable by others (mode {mode:o}): it holds an admin token",
                f"chmod 600 {path}",
            )
        ]
    return [Finding("token file", "ok", f"{path} is private (mode {mode:o})")]


async def _database(store: Store) -> list[Finding]:
    try:
        revision = await store.schema_revision()
    except Exception as exc:
        return [Finding("database", "fail", f"does not answer: {mask(str(exc))}", _DB_FIX)]
    head = head_revision()
    reached = Finding("database", "ok", "answers")
    if revision is None:
        return [reached, Finding("schema", "fail", "not migrated", "tickwork db upgrade")]
    if revision != head:
        message = f"at {revision}; this version needs {head}"
        return [reached, Finding("schema", "fail", message, "tickwork db upgrade")]
    return [reached, Finding("schema", "ok", f"at the newest revision ({head})")]


async def _skew(store: Store) -> Finding:
    sent = time.time()
    facts = await store.server_facts()
    back = time.time()
    server = datetime.fromisoformat(facts["now"]).timestamp()
    return skew_finding(server - (sent + back) / 2, back - sent)


def skew_finding(skew: float, round_trip: float) -> Finding:
    if abs(skew) > MAX_SKEW + round_trip / 2:
        return Finding(
            "clock",
            "warn",
            f"this host's clock is {-skew:+.1f} s off the database's",
            "run NTP (chrony, systemd-timesyncd) on this host and the database's",
        )
    return Finding("clock", "ok", f"within {abs(skew):.2f} s of the database's")


async def _broker(settings: Settings) -> Finding:
    broker = open_broker(settings)
    try:
        await asyncio.wait_for(broker_check(broker)(), 5.0)
    except Exception as exc:
        return Finding(
            "broker", "fail", f"does not answer: {mask(str(exc))}", "check TICKWORK_REDIS_URL"
        )
    finally:
        with contextlib.suppress(Exception):
            await broker.close()
    return Finding("broker", "ok", "answers")


def postgres_findings(
    facts: Mapping[str, str], processes: Sequence[WorkerInfo], apis: int
) -> list[Finding]:
    """The PostgreSQL server's settings against what tickwork needs (issue 17, §4)."""
    return [_wal(facts), _autovacuum(facts), _connections(facts, processes, apis)]


def _wal(facts: Mapping[str, str]) -> Finding:
    mb = _megabytes(facts.get("max_wal_size", "0"), facts.get("max_wal_size.unit", "MB"))
    if mb < MIN_WAL_MB:
        return Finding(
            "max_wal_size",
            "warn",
            f"{mb} MB: under load checkpoints come too often (each rewrites hot pages)",
            f"ALTER SYSTEM SET max_wal_size = '{ADVISED_WAL}'; ALTER SYSTEM SET "
            f"checkpoint_timeout = '{ADVISED_CHECKPOINT_TIMEOUT}'; SELECT pg_reload_conf();",
        )
    return Finding("max_wal_size", "ok", f"{mb} MB")


def _autovacuum(facts: Mapping[str, str]) -> Finding:
    if facts.get("autovacuum", "on") != "on":
        return Finding(
            "autovacuum",
            "warn",
            "off: task_runs and runs bloat and their partial indexes stop being cheap",
            "ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();",
        )
    server = float(facts.get("autovacuum_vacuum_scale_factor", "0.2"))
    late = {
        name[len(PARTITION_SCALE) :]: float(value or server)
        for name, value in sorted(facts.items())
        if name.startswith(PARTITION_SCALE) and float(value or server) > MAX_VACUUM_SCALE
    }
    if late:
        shown = ", ".join(f"{name} at {scale:.0%}" for name, scale in late.items())
        fix = "; ".join(
            f"ALTER TABLE {name} SET (autovacuum_vacuum_scale_factor = {ADVISED_VACUUM_SCALE})"
            for name in late
        )
        return Finding(
            "autovacuum",
            "warn",
            f"on, but this month's hot partitions are vacuumed only past {shown} dead rows",
            f"{fix} (and the months ahead: deploy/README.md, Sizing PostgreSQL)",
        )
    return Finding("autovacuum", "ok", "on")


def _connections(facts: Mapping[str, str], processes: Sequence[WorkerInfo], apis: int) -> Finding:
    schedulers = sum(1 for p in processes if p.kind == "scheduler")
    workers = sum(1 for p in processes if p.kind == "worker")
    needed = PG_POOL_SIZE * (schedulers + 1) + DIRECT_POOLED * (workers + apis)
    have = int(facts.get("max_connections", "0"))
    counted = f"{schedulers} scheduler(s) and {workers} worker(s) registered, {apis} API(s)"
    if have < needed:
        return Finding(
            "max_connections",
            "warn",
            f"{have}, but {counted} may hold {needed} connections",
            f"raise max_connections to at least {needed} (a restart), or run fewer processes",
        )
    return Finding("max_connections", "ok", f"{have} for up to {needed} ({counted})")


def _megabytes(value: str, unit: str) -> int:
    """A pg_settings size (``setting`` in units of ``unit``: "MB", "8kB", "16MB"...) in MB."""
    number = "".join(c for c in unit if c.isdigit()) or "1"
    scale = {"kB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}.get(
        unit.lstrip("0123456789"), 1
    )
    return int(int(value) * int(number) * scale)
