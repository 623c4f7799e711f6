"""Services over a real SqlStore (SQLite) and the MemoryBroker."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta

import pytest

from tests.helpers import FakeClock, Wakes, utc
from tickwork.app.records import JobSpec
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.core.errors import Conflict, NotFound, ValidationError
from tickwork.core.jitter import spread_fires
from tickwork.core.model import (
    Job,
    LogChunk,
    RetryPolicy,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRunState,
)
from tickwork.store import SqlStore

NOW = utc(2026, 6, 1, 12, 0, 0)
TASK = Task(name="main", kind=TaskKind.PYTHON, config={"target": "tests.fixtures.tasks:noop"})


def spec(name: str, schedule: Schedule | None = None, **extra: object) -> JobSpec:
    return JobSpec(
        name=name,
        schedule=schedule or Schedule(kind=ScheduleKind.NOW),
        tasks=(TASK,),
        **extra,  # type: ignore[arg-type]
    )


def counting_ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"id{next(counter):04d}"


@pytest.fixture
def broker() -> MemoryBroker:
    return MemoryBroker()


@pytest.fixture
def wakes() -> Wakes:
    return Wakes()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def services(
    sqlite_store: SqlStore, broker: MemoryBroker, wakes: Wakes, clock: FakeClock
) -> Services:
    return Services(sqlite_store, broker, wake=wakes, clock=clock, make_id=counting_ids())


async def _published(broker: MemoryBroker) -> list[str]:
    return [d.task_run_id for d in await broker.consume(["default"], 10_000, 0.01)]


async def test_create_now_job_stores_a_queued_run_for_now_and_publishes_it(
    services: Services, broker: MemoryBroker, wakes: Wakes
) -> None:
    job = await services.create_job(spec("hello", priority=3))
    assert (job.id, job.created_at, job.updated_at) == ("id0000", NOW, NOW)

    page = await services.list_runs(job="hello")
    [run] = page.runs
    assert (run.logical_date, run.trigger, run.state) == (NOW, RunTrigger.SCHEDULE, RunState.QUEUED)
    detail = await services.get_run(run.id)
    [task_run] = detail.task_runs
    assert (task_run.state, task_run.queued_at, task_run.priority) == (TaskRunState.QUEUED, NOW, 3)
    deliveries = await broker.consume(["default"], 10, 0.01)
    assert [(d.task_run_id, d.attempt, d.priority) for d in deliveries] == [(task_run.id, 1, 3)]
    assert wakes.count == 0  # immediate jobs bypass the scheduler


async def test_create_at_job_schedules_its_run_due_at_the_instant(
    services: Services, broker: MemoryBroker, wakes: Wakes
) -> None:
    at = NOW + timedelta(hours=1)
    await services.create_job(spec("ping", Schedule(kind=ScheduleKind.AT, at=at)))
    [run] = (await services.list_runs(job="ping")).runs
    [task_run] = (await services.get_run(run.id)).task_runs
    assert (task_run.state, task_run.due_at, run.logical_date) == (TaskRunState.SCHEDULED, at, at)
    assert await _published(broker) == []
    assert wakes.count == 1
    assert await services.upcoming("ping") == [at]


async def test_upcoming_of_an_at_job_is_empty_once_its_run_is_cancelled(
    services: Services,
) -> None:
    at = NOW + timedelta(hours=1)
    await services.create_job(spec("ping", Schedule(kind=ScheduleKind.AT, at=at)))
    [run] = (await services.list_runs(job="ping")).runs
    await services.cancel_run(run.id)
    assert await services.upcoming("ping") == []


async def test_create_cron_job_sets_next_fire_at_not_before_start(services: Services) -> None:
    start = utc(2026, 7, 1)
    schedule = Schedule(kind=ScheduleKind.CRON, cron="0 * * * *", start=start)
    job = await services.create_job(spec("hourly", schedule))
    assert job.next_fire_at == start
    assert (await services.get_job("hourly")).next_fire_at == start
    assert (await services.list_runs(job="hourly")).runs == []
    assert await services.upcoming("hourly", 2) == [start, start + timedelta(hours=1)]


async def test_upcoming_due_loads_the_job_once_and_moves_each_fire_by_its_jitter(
    services: Services, sqlite_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = utc(2026, 7, 1)
    schedule = Schedule(kind=ScheduleKind.CRON, cron="0 * * * *", start=start)
    await services.create_job(spec("spread", schedule, jitter=600.0))
    loads: list[str] = []
    get_job = sqlite_store.get_job

    async def counted(name: str) -> Job | None:
        loads.append(name)
        return await get_job(name)

    monkeypatch.setattr(sqlite_store, "get_job", counted)
    up = await services.upcoming_due("spread", 3)
    assert loads == ["spread"] and up.job.name == "spread"
    hours = [start + timedelta(hours=i) for i in range(4)]
    assert up.fires == hours[:3]
    assert up.dues == spread_fires("spread", hours[:3], 600.0, hours[3])
    assert all(f < d < f + timedelta(minutes=10) for f, d in zip(up.fires, up.dues, strict=True))
    with pytest.raises(ValidationError) as caught:
        await services.upcoming_due("spread", 1001)
    assert caught.value.field == "count"


async def test_create_jobs_is_all_or_nothing_when_a_name_exists(
    services: Services, broker: MemoryBroker
) -> None:
    await services.create_job(spec("taken", Schedule(kind=ScheduleKind.CRON, cron="0 0 * * *")))
    with pytest.raises(Conflict):
        await services.create_jobs([spec("fresh"), spec("taken")])
    assert [j.name for j in (await services.list_jobs()).jobs] == ["taken"]
    assert await _published(broker) == []


async def test_create_jobs_prefixes_errors_with_the_item_index(services: Services) -> None:
    bad = spec("bad", Schedule(kind=ScheduleKind.CRON, cron="nope"))
    with pytest.raises(ValidationError) as caught:
        await services.create_jobs([spec("good"), bad])
    assert caught.value.field == "jobs[1].schedule.cron"
    assert (await services.list_jobs()).jobs == []


async def test_create_jobs_refuses_a_name_twice_in_one_batch(services: Services) -> None:
    with pytest.raises(Conflict) as caught:
        await services.create_jobs([spec("same"), spec("same")])
    assert caught.value.field == "jobs[1].name"


async def test_create_job_refuses_an_at_in_the_past_unless_allowed(services: Services) -> None:
    past = Schedule(kind=ScheduleKind.AT, at=NOW - timedelta(days=1))
    with pytest.raises(ValidationError) as caught:
        await services.create_job(spec("late", past))
    assert caught.value.field == "schedule.at"
    await services.create_job(spec("late", past), allow_past=True)
    assert [r.logical_date for r in (await services.list_runs(job="late")).runs] == [past.at]


async def test_create_job_keeps_the_retry_policy(services: Services) -> None:
    policy = RetryPolicy(max_attempts=4, initial_delay=2.0)
    await services.create_job(spec("r", retry=policy))
    assert (await services.get_job("r")).retry == policy


async def test_trigger_queues_a_manual_run_and_refuses_the_same_logical_date(
    services: Services, broker: MemoryBroker
) -> None:
    await services.create_job(spec("c", Schedule(kind=ScheduleKind.CRON, cron="0 0 * * *")))
    detail = await services.trigger("c")
    assert (detail.run.trigger, detail.run.logical_date) == (RunTrigger.MANUAL, NOW)
    assert await _published(broker) == [detail.task_runs[0].id]
    with pytest.raises(Conflict):
        await services.trigger("c", NOW)
    with pytest.raises(ValidationError):
        await services.trigger("c", NOW.replace(tzinfo=None))
    with pytest.raises(NotFound):
        await services.trigger("missing")


async def test_pause_resume_and_delete(services: Services, wakes: Wakes) -> None:
    await services.create_job(spec("c", Schedule(kind=ScheduleKind.CRON, cron="0 0 * * *")))
    assert (await services.pause("c")).paused is True
    assert (await services.resume("c")).paused is False
    assert wakes.count == 1
    await services.delete_job("c")
    with pytest.raises(NotFound):
        await services.get_job("c")
    with pytest.raises(NotFound):
        await services.pause("c")


async def test_cancel_then_retry_a_run(services: Services, wakes: Wakes) -> None:
    await services.create_job(spec("n"))
    [run] = (await services.list_runs()).runs
    assert (await services.cancel_run(run.id)).run.state is RunState.CANCELLED
    with pytest.raises(Conflict):
        await services.cancel_run(run.id)
    retried = await services.retry_run(run.id)
    assert retried.task_runs[0].state is TaskRunState.SCHEDULED
    assert wakes.count == 1
    with pytest.raises(Conflict):
        await services.retry_run(run.id)


async def test_list_runs_checks_its_filters(services: Services) -> None:
    with pytest.raises(ValidationError) as bad_state:
        await services.list_runs(state="sleepy")
    assert bad_state.value.field == "state"
    with pytest.raises(NotFound):
        await services.list_runs(job="missing")
    with pytest.raises(ValidationError):
        await services.list_runs(limit=0)


async def test_logs_return_chunks_and_the_next_offset(
    services: Services, sqlite_store: SqlStore
) -> None:
    await services.create_job(spec("n"))
    [run] = (await services.list_runs()).runs
    task_run = (await services.get_run(run.id)).task_runs[0]
    await sqlite_store.append_logs([LogChunk(task_run.id, 1, 0, "stdout", "hi\n", NOW)])
    page = await services.logs(run.id)
    assert ([c.data for c in page.chunks], page.next_after_seq) == (["hi\n"], 0)
    assert page.finished is False
    assert (await services.logs(run.id, after_seq=0)).chunks == []


def test_preview_is_pure_and_names_its_parameters(services: Services) -> None:
    fires = services.preview("0 12 * * *", "UTC", 2, NOW)
    assert fires == [NOW + timedelta(days=1), NOW + timedelta(days=2)]
    with pytest.raises(ValidationError) as bad_zone:
        services.preview("0 12 * * *", "Nowhere/Land")
    assert bad_zone.value.field == "timezone"
    with pytest.raises(ValidationError) as bad_cron:
        services.preview("0 12 * *")
    assert bad_cron.value.field == "cron"
