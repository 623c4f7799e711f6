"""Dashboard page times with 100,000 runs and 2,000 jobs, on SQLite and PostgreSQL.

    .venv/bin/python bench/dashboard.py [--backend sqlite|postgres|both] [--runs 100000]
                                        [--jobs 2000] [--requests 40] [--pages a,b]

Seeds a fresh database through the store (2,000 jobs: cron jobs on a few dozen schedules and
5-task workflows; 100,000 runs over the last 30 days, mostly successful, some failed, running
and queued, with attempts), then renders every dashboard page ``--requests`` times in process
(the FastAPI app with the dashboard, driven over ASGI: the server's time, no network), signed
in with a session cookie, and prints p50/p95/min wall time per page in milliseconds and the
median and p95 CPU time of the process per request (all threads: the store's too), which a
loaded machine inflates less than wall time (PostgreSQL's own CPU is not in it).
``--pages overview,jobs,calendar`` measures only those. Also times the
layered layout of a 200-task DAG. PostgreSQL: a database made for the run on ``--pg`` and
dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import statistics
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2
import psycopg

from tickwork.api.app import create_app
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.core.layout import layout
from tickwork.core.model import (
    Job,
    NewRun,
    RetryPolicy,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRunState,
)
from tickwork.core.runs import new_run
from tickwork.dashboard import with_dashboard
from tickwork.dashboard.session import COOKIE, _digest
from tickwork.ids import new_id
from tickwork.ports import Scope
from tickwork.ports.web import WebSession
from tickwork.store import SqlStore, open_store

CRONS = [f"{m} {h} * * *" for m in (0, 15, 30) for h in (1, 6, 12)] + [
    "*/5 * * * *", "0 * * * *", "30 9 * * 1-5", "0 2 * * 0", "*/15 * * * *", "0 9,17 * * *",
]  # fmt: skip
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"]


def make_jobs(count: int, now: datetime) -> list[Job]:
    jobs = []
    for i in range(count):
        workflow = i % 20 == 0
        tasks = tuple(
            Task(f"step{t}", TaskKind.SHELL, {"argv": ["true"]},
                 upstream=(f"step{t - 1}",) if t and workflow else ())
            for t in range(5 if workflow else 1)
        )  # fmt: skip
        schedule = Schedule(ScheduleKind.CRON, cron=CRONS[i % len(CRONS)], timezone=ZONES[i % 4])
        jobs.append(
            Job(
                id=new_id(),
                name=f"job-{i:05d}",
                schedule=schedule,
                tasks=tasks,
                created_at=now,
                updated_at=now,
                retry=RetryPolicy(),
                queue="default" if i % 7 else "reports",
                tags=("nightly",) if i % 3 == 0 else (),
                next_fire_at=now + timedelta(minutes=1 + i % 600),
            )
        )
    return jobs


def finished_run(job: Job, logical: datetime, state: TaskRunState, rng: random.Random) -> NewRun:
    nr = new_run(job, logical, trigger=RunTrigger.SCHEDULE, now=logical, make_id=new_id)
    start = logical + timedelta(seconds=rng.random() * 2)
    took = timedelta(seconds=1 + rng.random() * 60)
    end = start + took
    task_runs = tuple(
        replace(tr, state=state, queued_at=logical, started_at=start, finished_at=end,
                heartbeat_at=end, error="exit code 1" if state is TaskRunState.FAILED else None)
        for tr in nr.task_runs
    )  # fmt: skip
    done = state in (TaskRunState.SUCCESS, TaskRunState.FAILED)
    run = replace(
        nr.run, state=RunState(state.value), started_at=start, finished_at=end if done else None
    )
    return NewRun(run=run, task_runs=task_runs)


async def seed(store: SqlStore, jobs: int, runs: int) -> tuple[str, str, str]:
    """Jobs and runs; returns (a workflow's name, one of its runs' id, a cron job's name)."""
    now = datetime.now(UTC)
    made = make_jobs(jobs, now)
    for i in range(0, len(made), 500):
        await store.create_jobs([(j, []) for j in made[i : i + 500]])
    rng = random.Random(11)
    per_job = max(1, runs // jobs)
    batch: list[NewRun] = []
    for n in range(per_job * jobs):
        job = made[n % jobs]
        logical = now - timedelta(minutes=43_200 * (n // jobs) / per_job + (n % jobs) / 100)
        roll = rng.random()
        state = (TaskRunState.FAILED if roll < 0.02 else TaskRunState.RUNNING if roll < 0.021
                 else TaskRunState.QUEUED if roll < 0.023 else TaskRunState.SUCCESS)  # fmt: skip
        batch.append(finished_run(job, logical, state, rng))
        if len(batch) == 1000:
            await store.create_runs(batch)
            batch = []
    if batch:
        await store.create_runs(batch)
    workflow = made[0]
    page = await store.list_runs(job_id=workflow.id, limit=1)
    return workflow.name, page.runs[0].id, made[1].name


async def session_cookie(store: SqlStore) -> str:
    issued = await TokenService(store, utc_now).create("bench", Scope.ADMIN)
    secret = secrets.token_urlsafe(32)
    now = datetime.now(UTC)
    await store.create_web_session(
        WebSession(_digest(secret), issued.token.id, "csrf", now, now + timedelta(hours=1))
    )
    return secret


def pages(workflow: str, run_id: str, cron_job: str) -> dict[str, str]:
    return {
        "overview": "/",
        "jobs": "/jobs",
        "jobs?tag": "/jobs?tag=nightly&state=active",
        "job": f"/jobs/{cron_job}",
        "job (workflow)": f"/jobs/{workflow}",
        "grid 25": f"/jobs/{workflow}/grid",
        "grid 100": f"/jobs/{workflow}/grid?runs=100",
        "runs": "/runs",
        "runs?state=failed": "/runs?state=failed",
        "runs?job": f"/runs?job={cron_job}",
        "run": f"/runs/{run_id}",
        "calendar": "/calendar",
        "dead letters": "/dead-letters",
        "workers": "/workers",
        "pools": "/pools",
        "audit": "/audit",
    }


async def measure(store: SqlStore, requests: int, targets: dict[str, str]) -> None:
    services = Services(store, MemoryBroker())
    app = with_dashboard(create_app(services), services)
    cookie = await session_cookie(store)
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://bench", cookies={COOKIE: cookie}
    ) as client:
        print(f"{'page':<20} {'p50 ms':>8} {'p95 ms':>8} {'min ms':>8} {'CPU p50':>8} "
              f"{'CPU p95':>8}  bytes")  # fmt: skip
        for name, path in targets.items():
            times: list[float] = []
            cpu: list[float] = []
            size = 0
            for _ in range(requests + 2):
                t0, c0 = time.perf_counter(), time.process_time()
                response = await client.get(path)
                times.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                assert response.status_code == 200, (
                    path,
                    response.status_code,
                    response.text[:300],
                )
                size = len(response.content)
            # The first two warm caches (templates, layouts).
            times, cpu = sorted(times[2:]), sorted(cpu[2:])
            print(
                f"{name:<20} {statistics.median(times):>8.1f} {_p95(times):>8.1f} "
                f"{times[0]:>8.1f} {statistics.median(cpu):>8.1f} {_p95(cpu):>8.1f}  {size}"
            )


def _p95(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


async def run_backend(url: str, args: argparse.Namespace) -> None:
    store = await open_store(url)
    try:
        await store.migrate()
        t0 = time.perf_counter()
        targets = pages(*await seed(store, args.jobs, args.runs))
        if args.pages:
            targets = {k: v for k, v in targets.items() if k in args.pages.split(",")}
        if url.startswith("postgresql"):  # what autovacuum would do after a bulk load
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE")
        print(f"seeded {args.jobs} jobs, {args.runs} runs in {time.perf_counter() - t0:.0f} s")
        await measure(store, args.requests, targets)
    finally:
        await store.close()


def layout_200() -> None:
    rng = random.Random(7)
    names = [f"t{i}" for i in range(200)]
    upstream = {n: rng.sample(names[:i], min(i, rng.randint(0, 3))) for i, n in enumerate(names)}
    times, cpu = [], []
    for _ in range(10):
        t0, c0 = time.perf_counter(), time.process_time()
        layout(names, upstream)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    mid, most, used = statistics.median(times), max(times), statistics.median(cpu)
    print(f"layout of a 200-task DAG: median {mid:.1f} ms (CPU {used:.1f} ms), max {most:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--pages", default="", help="only these pages (names, commas)")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    layout_200()
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            print("\n== SQLite")
            asyncio.run(run_backend(f"sqlite:///{Path(tmp) / 'bench.db'}", args))
    if args.backend in ("postgres", "both"):
        name = f"tw_bench_dashboard_{os.getpid()}"
        with psycopg.connect(args.pg, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        try:
            print("\n== PostgreSQL")
            base = args.pg.rsplit("/", 1)[0]
            asyncio.run(run_backend(f"{base}/{name}", args))
        finally:
            with psycopg.connect(args.pg, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
