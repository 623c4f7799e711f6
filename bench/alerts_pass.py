"""The scheduler pass with and without the run-alert check (issue 12), on SQLite and PostgreSQL.

    .venv/bin/python bench/alerts_pass.py [--jobs 2000] [--runs 50000] [--passes 40]
        [--postgres URL | --no-postgres]

A store with ``--jobs`` cron jobs (none due: their next fire is a day ahead; 100 set one of
10 start deadlines, 50 one of 5 SLAs) and ``--runs`` runs spread over the last 24 hours
(finished, a few still queued). Then ``--passes`` scheduler passes (``Scheduler.tick``, the
housekeeping in every pass: reaper, re-sender and, in A, the alert check), the clock moving
2 s a pass as the housekeeping does; A (with the check) and B (the check a no-op) alternate
pass by pass. Prints the median wall time of a pass for A and B, and of the check alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_ops import _create_pg_database, _drop_pg_database

from tickwork.broker.memory import MemoryBroker
from tickwork.core.alerts import Alert
from tickwork.core.model import (
    Job,
    RunTrigger,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRunState,
)
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.scheduler.loop import Scheduler, SchedulerConfig
from tickwork.store import SqlStore, open_store

NOW = datetime.now(UTC).replace(microsecond=0)
STEP = timedelta(seconds=2)


def _jobs(count: int) -> list[Job]:
    task = Task("main", TaskKind.SHELL, {"argv": ["true"]})
    cron = Schedule(ScheduleKind.CRON, cron="0 3 * * *")
    found = []
    for i in range(count):
        job = Job(
            id=new_id(), name=f"bench-{i}", schedule=cron, tasks=(task,), created_at=NOW,
            updated_at=NOW, next_fire_at=NOW + timedelta(days=1),
            start_deadline=60.0 * (1 + i % 10) if i % 20 == 0 else None,
            sla=600.0 * (1 + i % 5) if i % 40 == 1 else None,
        )  # fmt: skip
        found.append(job)
    return found


async def _seed(store: SqlStore, jobs: list[Job], runs: int) -> None:
    await store.create_jobs([(j, []) for j in jobs])
    spread = timedelta(days=1) / runs
    batch = []
    for i in range(runs):
        job = jobs[i % len(jobs)]
        date = NOW - timedelta(days=1) + i * spread
        state = TaskRunState.QUEUED if i % 100 == 0 else TaskRunState.SUCCESS
        made = new_run(
            job, date, trigger=RunTrigger.SCHEDULE, now=date, make_id=new_id, state=state
        )
        batch.append(made)
        if len(batch) == 1000:
            await store.create_runs(batch)
            batch = []
    if batch:
        await store.create_runs(batch)


async def _noop(now: datetime) -> list[Alert]:
    return []


async def bench(url: str, label: str, jobs: int, runs: int, passes: int) -> None:
    store = await open_store(url)
    try:
        await store.migrate()
        await _seed(store, _jobs(jobs), runs)
        config = SchedulerConfig(housekeeping_every=0.0)
        with_check = Scheduler(
            store, MemoryBroker(), clock=lambda: NOW, rand=lambda: 0.5, make_id=new_id,
            config=config,
        )  # fmt: skip
        without = Scheduler(
            store, MemoryBroker(), clock=lambda: NOW, rand=lambda: 0.5, make_id=new_id,
            config=config,
        )  # fmt: skip
        without.alerts.check = _noop  # type: ignore[method-assign]
        times: dict[str, list[float]] = {"A": [], "B": [], "check": []}
        now = NOW
        for _ in range(passes):
            now += STEP
            for key, scheduler in (("A", with_check), ("B", without)):
                start = time.perf_counter()
                await scheduler.tick(now)
                times[key].append(time.perf_counter() - start)
            start = time.perf_counter()
            await with_check.alerts.check(now + STEP / 2)
            times["check"].append(time.perf_counter() - start)
    finally:
        await store.close()
    a, b, c = (statistics.median(times[k]) * 1000 for k in ("A", "B", "check"))
    print(
        f"{label:<10} pass with the alert check {a:.2f} ms, without {b:.2f} ms "
        f"(+{a - b:.2f} ms); the check alone {c:.2f} ms  (medians of {passes})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--passes", type=int, default=40)
    default_pg = os.environ.get(
        "TICKWORK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--postgres", default=default_pg)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    work = (args.jobs, args.runs, args.passes)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(f"sqlite:///{Path(tmp) / 'bench.db'}", "sqlite", *work))
    if args.no_postgres:
        return
    name, url = _create_pg_database(args.postgres)
    try:
        asyncio.run(bench(url, "postgresql", *work))
    finally:
        _drop_pg_database(args.postgres, name)


if __name__ == "__main__":
    main()
