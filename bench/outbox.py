"""outbox.enqueue with a commit per job: jobs/s from one psycopg connection (issue 14: ≥ 4,000/s).

Usage: .venv/bin/python bench/outbox.py [--jobs 5000] [--rounds 3] [--postgres URL]
Makes a scratch database on the server, enqueues ``--jobs`` runs of a no-op job, each in its
own transaction, and prints the median rate of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import UTC, datetime

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


def _round(url: str, jobs: int) -> float:
    with psycopg.connect(_libpq(url)) as conn:
        start = time.perf_counter()
        for i in range(jobs):
            outbox.enqueue(conn, "noop", {"i": i})
            conn.commit()
        return jobs / (time.perf_counter() - start)


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
        rates = [_round(url, args.jobs) for _ in range(args.rounds)]
        each = ", ".join(f"{r:,.0f}" for r in rates)
        median = statistics.median(rates)
        print(f"outbox.enqueue, commit per job: {median:,.0f} jobs/s (median of {each})")
    finally:
        with psycopg.connect(_libpq(args.postgres), autocommit=True) as admin:
            statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            admin.execute(statement.format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
