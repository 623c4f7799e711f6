"""The contender interface, the result shapes every contender returns, and the registry.

A contender is one system under test (a peer such as Celery, or tickwork itself) set up on the
shared services of a run (one Redis server, the local PostgreSQL). The harness calls, in order:
``start()``, ``w1(n)``, ``w2(rate, seconds)``, ``w3(n)``, and always ``stop()``. Timings must be
taken the same way for everyone: job start = the first statement of the job's body, enqueue
time = just before the submit call, due instant = the instant the job was scheduled for, all
on this machine's wall clock.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from peers.infra import Procs


@dataclass(frozen=True)
class Services:
    """What a run provides to every contender."""

    redis_url: str  # a private redis-server on a free port, flushed between contenders
    pg_host: str
    pg_port: int
    pg_user: str
    workers: int  # worker processes per contender
    out_dir: Path  # logs and records of this run (bench/results/peers-<stamp>/)
    venv_root: Path  # bench/.venvs
    procs: Procs  # spawn every process through this: it is ended on exit, even on failure

    def pg_dsn(self, dbname: str) -> str:
        return f"host={self.pg_host} port={self.pg_port} user={self.pg_user} dbname={dbname}"

    def pg_url(self, dbname: str) -> str:
        return f"postgresql://{self.pg_user}@{self.pg_host}:{self.pg_port}/{dbname}"

    def pg_env(self, dbname: str) -> dict[str, str]:
        """How a contender's processes find their database (compose other URL forms from the
        parts, e.g. ``postgresql+psycopg://${PEERBENCH_PG_USER}@...``)."""
        return {
            "PEERBENCH_PG_DSN": self.pg_dsn(dbname),
            "PEERBENCH_PG_URL": self.pg_url(dbname),
            "PEERBENCH_PG_HOST": self.pg_host,
            "PEERBENCH_PG_PORT": str(self.pg_port),
            "PEERBENCH_PG_USER": self.pg_user,
            "PEERBENCH_PG_DB": dbname,
        }


@dataclass(frozen=True)
class Info:
    name: str
    version: str  # e.g. "celery 5.7.0"
    config: str  # the exact worker command(s) / settings
    notes: str  # semantics that matter when reading the numbers
    packages: dict[str, str] = field(default_factory=dict)  # full resolved versions


@dataclass(frozen=True)
class Throughput:
    """W1: N no-op jobs, first submit -> last job start (no-op: start ~ completion)."""

    jobs: int
    submit_s: float
    total_s: float
    jobs_per_s: float
    submit_jobs_per_s: float
    bulk: str
    lost: int = 0
    duplicates: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # anything else worth keeping


@dataclass(frozen=True)
class Latency:
    """W2 start latency or W3 lateness, in ms (negative lateness = started early)."""

    n: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    min_ms: float
    lost: int = 0
    duplicates: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # W3: "submitted_after_due"


class Contender(Protocol):
    def start(self) -> Info: ...
    def w1(self, n: int) -> Throughput: ...
    def w2(self, rate: float, seconds: float) -> Latency: ...
    def w3(self, n: int) -> Latency: ...
    def stop(self) -> None: ...


Factory = Callable[[Services], Contender]
REGISTRY: dict[str, Factory] = {}
DEFAULT: list[str] = []  # what runs when --peers is not given, in registration order


def register(name: str, factory: Factory, *, default: bool = True) -> None:
    if name in REGISTRY:
        raise ValueError(f"contender {name!r} registered twice")
    REGISTRY[name] = factory
    if default:
        DEFAULT.append(name)


def pct(values: list[float], p: int) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def latency(values_ms: list[float], *, lost: int = 0, duplicates: int = 0, **extra: Any) -> Latency:
    if not values_ms:
        nan = float("nan")
        return Latency(0, nan, nan, nan, nan, nan, lost, duplicates, extra)
    return Latency(
        n=len(values_ms),
        p50_ms=round(statistics.median(values_ms), 2),
        p95_ms=round(pct(values_ms, 95), 2),
        p99_ms=round(pct(values_ms, 99), 2),
        max_ms=round(max(values_ms), 2),
        min_ms=round(min(values_ms), 2),
        lost=lost,
        duplicates=duplicates,
        extra=extra,
    )
