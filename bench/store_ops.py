"""Micro-benchmark of the SQL store's hot paths: rows/s for batches on SQLite and PostgreSQL.

    .venv/bin/python bench/store_ops.py [--batch 500] [--rounds 5] [--postgres URL | --no-postgres]

Each round creates ``batch`` jobs with one queued run each (``create_jobs``), claims all their
task runs (``claim``), heartbeats them (``heartbeat``) and completes them (``complete``), one
call per batch. PostgreSQL runs in a fresh throwaway database on the given server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from tickwork.core.model import (
    Job,
    NewRun,
    Outcome,
    Run,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRun,
    TaskRunState,
)
from tickwork.ids import new_id
from tickwork.store import SqlStore, open_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OPS = ("create_jobs", "claim", "heartbeat", "complete")


def _job_with_run(name: str) -> tuple[Job, list[NewRun]]:
    task = Task(name="main", kind=TaskKind.PYTHON, config={"target": "m:f"})
    job = Job(
        id=new_id(),
        name=name,
        schedule=Schedule(kind=ScheduleKind.NOW),
        tasks=(task,),
        created_at=T0,
        updated_at=T0,
    )
    run = Run(new_id(), job.id, name, T0, RunState.QUEUED, RunTrigger.SCHEDULE, T0)
    task_run = TaskRun(
        id=new_id(),
        run_id=run.id,
        job_id=job.id,
        job_name=name,
        task_name="main",
        kind=task.kind,
        config=task.config,
        state=TaskRunState.QUEUED,
        attempt=1,
        retry=job.retry,
        due_at=T0,
        logical_date=T0,
        queued_at=T0,
    )
    return job, [NewRun(run, (task_run,))]


async def _timed(action: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (this process, all threads) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    await action()
    return time.perf_counter() - start, time.process_time() - cpu


async def _round(store: SqlStore, batch: int, tag: str) -> dict[str, tuple[float, float]]:
    items = [_job_with_run(f"bench-{tag}-{i}") for i in range(batch)]
    keys = [(runs[0].task_runs[0].id, 1) for _, runs in items]
    now = T0 + timedelta(seconds=1)
    outcomes = [Outcome(k[0], 1, TaskRunState.SUCCESS, now, worker_id="w") for k in keys]
    return {
        "create_jobs": await _timed(lambda: store.create_jobs(items)),
        "claim": await _timed(lambda: store.claim(keys, "w", now)),
        "heartbeat": await _timed(lambda: store.heartbeat(keys, "w", now)),
        "complete": await _timed(lambda: store.complete(outcomes)),
    }


async def bench(url: str, label: str, batch: int, rounds: int) -> None:
    store = await open_store(url)
    try:
        await store.migrate()
        await _round(store, batch, "warmup")
        results = [await _round(store, batch, str(r)) for r in range(rounds)]
    finally:
        await store.close()
    for op in OPS:
        median = statistics.median(r[op][0] for r in results)
        cpu = statistics.median(r[op][1] for r in results)
        print(
            f"{label:<10} {op:<12} {batch / median:>10,.0f} rows/s  ({median * 1000:.1f} ms/batch,"
            f" client CPU {cpu / batch * 1e6:.0f} µs/row)"
        )


def _create_pg_database(admin_url: str) -> tuple[str, str]:
    name = f"tickwork_bench_{os.getpid()}"
    libpq = make_url(admin_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(libpq, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, make_url(admin_url).set(database=name).render_as_string(False)


def _drop_pg_database(admin_url: str, name: str) -> None:
    libpq = make_url(admin_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(libpq, autocommit=True) as conn:
        statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        conn.execute(statement.format(sql.Identifier(name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    default_pg = os.environ.get(
        "TICKWORK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--postgres", default=default_pg)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(f"sqlite:///{Path(tmp) / 'bench.db'}", "sqlite", args.batch, args.rounds))
    if args.no_postgres:
        return
    name, url = _create_pg_database(args.postgres)
    try:
        asyncio.run(bench(url, "postgresql", args.batch, args.rounds))
    finally:
        _drop_pg_database(args.postgres, name)


if __name__ == "__main__":
    main()
