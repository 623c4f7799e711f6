""" "Why isn't it running?" with a real store (SQLite and PostgreSQL): each reason, set up
through the services and the store as the scheduler and workers would leave it."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from tests.helpers import FakeClock, make_job, utc
from tickwork.app.records import JobSpec
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import (
    Outcome,
    RetryPolicy,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRunState,
)
from tickwork.ports import Store, WorkerInfo

NOW = utc(2026, 6, 1, 12, 0)
DAILY = Schedule(kind=ScheduleKind.CRON, cron="0 2 * * *", timezone="UTC")


def task(name: str = "main", **kw: Any) -> Task:
    return Task(name=name, kind=TaskKind.SHELL, config={"argv": ["true"]}, **kw)


def services(store: Store, *, leader: bool | None = None) -> Services:
    async def probe() -> bool:
        assert leader is not None
        return leader

    return Services(
        store, MemoryBroker(), clock=FakeClock(NOW), leader=None if leader is None else probe
    )


async def add(svc: Services, name: str = "j", **kw: Any) -> None:
    spec: dict[str, Any] = {"name": name, "schedule": DAILY, "tasks": (task(),), **kw}
    await svc.create_job(JobSpec(**spec), allow_past=True)


async def why(svc: Services, run_id: str) -> list[str]:
    return [r.code + ": " + r.message for r in await svc.why.run(run_id)]


async def test_not_due_and_paused(store: Store) -> None:
    svc = services(store)
    at = Schedule(kind=ScheduleKind.AT, at=NOW + timedelta(minutes=3, seconds=12))
    await add(svc, schedule=at)
    [run] = (await svc.list_runs(job="j")).runs
    assert await why(svc, run.id) == [
        "not_due: task main is not due until 2026-06-01 12:03:12Z (in 3 min 12 s)"
    ]
    await svc.pause("j")
    assert (await why(svc, run.id))[0] == "job_paused: job 'j' is paused"


async def test_job_ended_and_not_due(store: Store) -> None:
    svc = services(store)
    ended = make_job("ended", now=NOW, schedule=DAILY)
    await store.create_jobs([(dataclasses.replace(ended, next_fire_at=None), [])])
    assert [r.code for r in await svc.why.job("ended")] == ["job_ended"]
    await add(svc, "daily")
    [reason] = await svc.why.job("daily")
    assert reason.message == "next fire not due until 2026-06-02 02:00:00Z (in 14 h 0 min)"


async def test_max_active_runs(store: Store) -> None:
    svc = services(store)
    await add(svc, max_active_runs=1)
    first = await svc.trigger("j", utc(2026, 5, 1))
    second = await svc.trigger("j", utc(2026, 5, 2))
    assert await why(svc, second.run.id) == [
        f"max_active_runs: waiting for max_active_runs (1): runs {first.run.id} active"
    ]
    assert (await why(svc, first.run.id))[0].startswith("due: ")


async def test_pool_full_names_its_holders(store: Store) -> None:
    svc = services(store)
    await svc.pools.set_pool("db", 1)
    await add(svc, tasks=(task(pool="db"),))
    holder = await svc.trigger("j", utc(2026, 5, 1))
    await store.mark_queued([(holder.task_runs[0].id, 1)], NOW)
    waiting = await svc.trigger("j", utc(2026, 5, 2))
    assert await why(svc, waiting.run.id) == [
        f"pool_full: pool db full (1/1 slots; held by runs {holder.run.id})"
    ]


async def test_depends_on_past(store: Store) -> None:
    svc = services(store)
    await add(svc, depends_on_past=True)
    past = await svc.trigger("j", utc(2026, 5, 1))
    tr = past.task_runs[0]
    await store.mark_queued([(tr.id, 1)], NOW)
    await store.claim([(tr.id, 1)], "w", NOW)
    await store.complete([Outcome(tr.id, 1, TaskRunState.FAILED, finished_at=NOW)])
    later = await svc.trigger("j", utc(2026, 5, 2))
    assert await why(svc, later.run.id) == [
        "depends_on_past: task main depends_on_past: waiting for the run of "
        f"2026-05-01 00:00:00Z ({past.run.id}, failed)"
    ]


async def test_upstream_pending_and_retry_backoff(store: Store) -> None:
    svc = services(store)
    dag = (task("a", retry=RetryPolicy(max_attempts=3)), task("b", upstream=("a",)))
    await add(svc, tasks=dag)
    run = await svc.trigger("j")
    a = next(tr for tr in run.task_runs if tr.task_name == "a")
    assert "upstream_pending: task b waits for upstream tasks still pending: a" in await why(
        svc, run.run.id
    )
    await store.claim([(a.id, 1)], "w", NOW)
    retry_at = NOW + timedelta(seconds=90)
    await store.complete(
        [Outcome(a.id, 1, TaskRunState.UP_FOR_RETRY, finished_at=NOW, retry_at=retry_at)]
    )
    assert sorted(await why(svc, run.run.id)) == [
        "retry_backoff: task a: retry backoff until 2026-06-01 12:01:30Z (in 1 min 30 s)",
        "upstream_pending: task b waits for upstream tasks still pending: a",
    ]


async def test_queues_without_workers_or_with_all_busy(store: Store) -> None:
    svc = services(store, leader=True)
    await add(svc)
    first = await svc.trigger("j", utc(2026, 5, 1))
    assert await why(svc, first.run.id) == [
        "no_worker: task main is queued on queue 'default' that no live worker serves"
    ]
    worker = WorkerInfo("w1", "host", 1, ("default",), 1, NOW, NOW, running=1)
    await store.register_worker(worker)
    second = await svc.trigger("j", utc(2026, 5, 2))
    assert await why(svc, second.run.id) == [
        "workers_busy: task main is queued behind 1 items with all workers of 'default' busy"
    ]
    anything = WorkerInfo("w2", "host", 2, ("*",), 4, NOW, NOW, running=0)
    await store.register_worker(anything)  # takes every queue, with free slots
    assert (await why(svc, second.run.id))[0].startswith("queued: task main is queued on")


async def test_no_leader(store: Store) -> None:
    svc = services(store, leader=False)
    await add(svc, schedule=Schedule(kind=ScheduleKind.AT, at=NOW - timedelta(minutes=1)))
    [run] = (await svc.list_runs(job="j")).runs
    assert await why(svc, run.id) == [
        "no_leader: no scheduler leader right now: nothing is being queued"
    ]
    assert "no_leader" in [r.code for r in await svc.why.job("j")]


async def test_finished_and_cancelled_runs(store: Store) -> None:
    svc = services(store)
    await add(svc)
    run = await svc.trigger("j")
    await svc.cancel_run(run.run.id)
    assert await why(svc, run.run.id) == [
        "cancelled: the run was cancelled at 2026-06-01 12:00:00Z"
    ]
