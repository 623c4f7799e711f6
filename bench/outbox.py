"""outbox.enqueue with a commit per job: jobs/s from one psycopg connection (issue 14: ≥ 4,000/s).

Usage: .venv/bin/python bench/outbox.py [--jobs 5000] [--rounds 3] [--postgres URL]
Makes a scratch database on the server, enqueues ``--jobs`` runs of a no-op job, each in its
own transaction, and prints the median rate of the rounds. Each round is followed by a round
of bare one-row ``INSERT`` + commit on a scratch table (what a commit per job costs on this
server at this moment: the bound), then a round of the outbox with ``synchronous_commit=off``
(commits not waiting for the WAL flush: what the outbox itself can do), and all print the
CPU each job cost this process and its server backend (from /proc, when the server is local),
which a shared machine's load inflates much less than the wall-clock rate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from tickwork import outbox
from tickwork.core.model import Job, RetryPolicy, Schedule, ScheduleKind, Task, TaskKind
from tickwork.core.params import ParamsContract
from tickwork.ids import new_id
from tickwork.store import open_store


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _prepare(url: str) -> None:
    store = await open_store(url)
    try:
        await store.migrate()
        now = datetime.now(UTC)
        task = Task(name="main", kind=TaskKind.SHELL, config={"argv": ["true"]})
        job = Job(
            id=new_id(), name="noop", schedule=Schedule(kind=ScheduleKind.NOW), tasks=(task,),
            created_at=now, updated_at=now, retry=RetryPolicy(),
            params=ParamsContract({"i": {"type": "integer"}}),
        )  # fmt: skip
        await store.create_jobs([(job, [])])
    finally:
        await store.close()


@dataclass(frozen=True)
class Round:
    rate: float  # jobs/s
    client_us: float  # CPU of this process per job
    server_us: float | None  # CPU of the server backend per job (None: not readable)


def _backend_cpu(pid: int) -> float | None:
    """Seconds of CPU the server process ``pid`` has used (local server only)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _round(url: str, jobs: int, bare: bool = False, lazy: bool = False) -> Round:
    with psycopg.connect(_libpq(url)) as conn:
        if lazy:  # the commit does not wait for the WAL flush: what the outbox itself costs
            conn.execute("SET synchronous_commit = off")
            conn.commit()
        if bare:
            conn.execute("CREATE TABLE IF NOT EXISTS bare (i int, at timestamptz)")
            conn.commit()
        pid = conn.info.backend_pid
        server0, cpu0, start = _backend_cpu(pid), time.process_time(), time.perf_counter()
        for i in range(jobs):
            if bare:
                conn.execute("INSERT INTO bare VALUES (%s, now())", (i,))
            else:
                outbox.enqueue(conn, "noop", {"i": i})
            conn.commit()
        wall, cpu, server1 = (
            time.perf_counter() - start,
            time.process_time() - cpu0,
            _backend_cpu(pid),
        )
        server = None if server0 is None or server1 is None else (server1 - server0) / jobs * 1e6
        return Round(jobs / wall, cpu / jobs * 1e6, server)


def _report(what: str, rounds: list[Round]) -> None:
    each = ", ".join(f"{r.rate:,.0f}" for r in rounds)
    median = statistics.median(r.rate for r in rounds)
    client = statistics.median(r.client_us for r in rounds)
    servers = [r.server_us for r in rounds if r.server_us is not None]
    server = f", server backend {statistics.median(servers):,.0f} µs" if servers else ""
    cpu = f"CPU per job: client {client:,.0f} µs{server}"
    print(f"{what}: {median:,.0f} jobs/s (median of {each}); {cpu}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    default_pg = os.environ.get(
        "TICKWORK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--postgres", default=default_pg)
    args = parser.parse_args()
    name = f"tickwork_bench_outbox_{os.getpid()}"
    with psycopg.connect(_libpq(args.postgres), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_url(args.postgres).set(database=name).render_as_string(hide_password=False)
    try:
        asyncio.run(_prepare(url))
        _round(url, min(args.jobs, 500))  # warm-up: prepared statements, caches
        outboxes, bares, lazies = [], [], []
        for _ in range(args.rounds):  # interleaved: all see the same load
            outboxes.append(_round(url, args.jobs))
            bares.append(_round(url, args.jobs, bare=True))
            lazies.append(_round(url, args.jobs, lazy=True))
        _report("outbox.enqueue, commit per job", outboxes)
        _report("bare 1-row INSERT, commit per job", bares)
        _report("outbox.enqueue, commit per job, synchronous_commit=off", lazies)
    finally:
        with psycopg.connect(_libpq(args.postgres), autocommit=True) as admin:
            statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            admin.execute(statement.format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
