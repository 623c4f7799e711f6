"""Scheduler and worker pool end to end on a real SQLite store, with the real runners."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import eventually, make_job, python_task, running_engine, shell_task
from tickwork.app.settings import Settings
from tickwork.core.model import (
    Attempt,
    Job,
    NewRun,
    RetryPolicy,
    RunDetail,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    TaskRunState,
)
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Store
from tickwork.scheduler.loop import deliveries
from tickwork.serve.embedded import Embedded, recover_orphans
from tickwork.serve.wiring import wire

TASKS = "tests.integration.engine_tasks"


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
async def engine(sqlite_store: Store) -> AsyncIterator[Embedded]:
    async with running_engine(sqlite_store, concurrency=4) as rt:
        yield rt


async def submit(rt: Embedded, job: Job) -> NewRun:
    """What the service layer does for a `now` job: insert queued, then publish."""
    t = now()
    nr = new_run(
        job, t, trigger=RunTrigger.SCHEDULE, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )
    await rt.store.create_jobs([(job, [nr])])
    await rt.broker.publish(deliveries(nr.task_runs))
    return nr


async def detail(rt: Embedded, nr: NewRun) -> RunDetail:
    d = await rt.store.get_run(nr.run.id)
    assert d is not None
    return d


def finished(d: RunDetail) -> bool:
    return d.run.state in {RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED}


async def test_now_job_runs_to_success_with_captured_output(engine: Embedded) -> None:
    job = make_job("hello", now=now(), task=python_task(f"{TASKS}:hello", name="x"))
    nr = await submit(engine, job)

    d = await eventually(lambda: detail(engine, nr), finished)

    assert d.run.state is RunState.SUCCESS
    assert d.task_runs[0].state is TaskRunState.SUCCESS and d.task_runs[0].attempt == 1
    logs = "".join(c.data for c in await engine.store.read_logs(d.task_runs[0].id))
    assert "hello x" in logs


async def test_failures_retry_with_backoff_then_succeed(engine: Embedded, tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    policy = RetryPolicy(max_attempts=3, initial_delay=0.2, multiplier=2, jitter=0)
    job = make_job(
        "flaky",
        now=now(),
        retry=policy,
        task=python_task(f"{TASKS}:fail_until", counter=str(counter), successes_after=2),
    )
    nr = await submit(engine, job)

    d = await eventually(lambda: detail(engine, nr), finished)

    assert d.run.state is RunState.SUCCESS
    assert counter.read_text() == "3"
    attempts = sorted(d.attempts, key=lambda a: a.attempt)
    assert [a.state for a in attempts] == [
        TaskRunState.UP_FOR_RETRY,
        TaskRunState.UP_FOR_RETRY,
        TaskRunState.SUCCESS,
    ]
    gap_1, gap_2 = (_gap(attempts[i], attempts[i + 1]) for i in (0, 1))
    assert 0.2 <= gap_1 < 2.0 and 0.4 <= gap_2 < 2.0


async def test_last_failure_is_dead_lettered_and_retry_reruns_it(
    engine: Embedded, tmp_path: Path
) -> None:
    counter = tmp_path / "calls"
    job = make_job(
        "dead",
        now=now(),
        retry=RetryPolicy(max_attempts=2, initial_delay=0.05),
        task=python_task(f"{TASKS}:fail_until", counter=str(counter), successes_after=2),
    )
    nr = await submit(engine, job)

    d = await eventually(lambda: detail(engine, nr), finished)
    assert d.run.state is RunState.FAILED and d.task_runs[0].state is TaskRunState.FAILED
    assert "RuntimeError: failing call 2" in (d.task_runs[0].error or "")
    dead = await engine.store.list_runs(state="dead")
    assert [r.id for r in dead.runs] == [nr.run.id]

    await engine.store.retry_run(nr.run.id, now())
    engine.scheduler.wake()
    d = await eventually(lambda: detail(engine, nr), finished)
    assert d.run.state is RunState.SUCCESS and d.task_runs[0].attempt == 3
    assert (await engine.store.list_runs(state="dead")).runs == []


async def test_timeout_kills_the_shell_task_and_fails_the_attempt(
    engine: Embedded, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    job = make_job(
        "slow",
        now=now(),
        timeout=0.5,
        task=shell_task("sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"),
    )
    nr = await submit(engine, job)

    d = await eventually(lambda: detail(engine, nr), finished)

    assert d.run.state is RunState.FAILED
    assert "timed out" in (d.task_runs[0].error or "")
    assert not _alive(int(pidfile.read_text()))


async def test_cancel_kills_a_running_shell_task_within_a_second(
    engine: Embedded, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    job = make_job(
        "long", now=now(), task=shell_task("sh", "-c", f"echo $$ > {pidfile}; exec sleep 60")
    )
    nr = await submit(engine, job)
    await eventually(lambda: detail(engine, nr), lambda d: d.run.state is RunState.RUNNING)
    await eventually(_read(pidfile), bool)

    requested = now()
    await engine.store.cancel_run(nr.run.id, requested)
    d = await eventually(lambda: detail(engine, nr), finished, timeout=5)

    assert d.run.state is RunState.CANCELLED
    assert d.task_runs[0].state is TaskRunState.CANCELLED
    assert d.task_runs[0].finished_at is not None
    assert (d.task_runs[0].finished_at - requested) < timedelta(seconds=1.5)
    assert not _alive(int(pidfile.read_text()))


async def test_cancel_of_a_scheduled_run_prevents_it(engine: Embedded, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    at = now() + timedelta(seconds=1)
    job = make_job(
        "later",
        now=now(),
        schedule=Schedule(kind=ScheduleKind.AT, at=at),
        task=shell_task("touch", str(marker)),
    )
    nr = new_run(job, at, trigger=RunTrigger.SCHEDULE, now=now(), make_id=new_id)
    await engine.store.create_jobs([(job, [nr])])
    engine.scheduler.wake()

    await engine.store.cancel_run(nr.run.id, now())
    d = await detail(engine, nr)
    assert d.run.state is RunState.CANCELLED
    await eventually(engine.store.next_due_at, lambda due: due is None)
    assert not marker.exists()


async def test_orphans_of_a_previous_process_are_retried_at_start(sqlite_store: Store) -> None:
    job = make_job("orphan", now=now(), retry=RetryPolicy(max_attempts=2, initial_delay=0))
    t = now()
    nr = new_run(
        job, t, trigger=RunTrigger.SCHEDULE, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )
    await sqlite_store.create_jobs([(job, [nr])])
    await sqlite_store.claim([(nr.task_runs[0].id, 1)], "previous-process", t)
    rt = wire(sqlite_store, Settings(concurrency=1))

    assert await recover_orphans(rt, now()) == 1
    d = await sqlite_store.get_run(nr.run.id)
    assert d is not None
    assert d.task_runs[0].state is TaskRunState.UP_FOR_RETRY and d.task_runs[0].attempt == 2


def _gap(earlier: Attempt, later: Attempt) -> float:
    """Seconds between one attempt's end and the next one's start (the backoff)."""
    assert later.started_at is not None
    return (later.started_at - earlier.finished_at).total_seconds()


def _read(path: Path) -> Callable[[], Awaitable[str]]:
    async def probe() -> str:
        return path.read_text().strip() if path.exists() else ""

    return probe


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie not yet reaped by its parent counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


async def test_drain_hands_back_claimed_ahead_task_runs_without_an_attempt(
    sqlite_store: Store,
) -> None:
    rt = wire(sqlite_store, Settings(concurrency=1))
    pool = asyncio.create_task(rt.pool.run())
    try:
        busy = await submit(rt, make_job("busy", now=now(), task=shell_task("sleep", "30")))
        await eventually(lambda: detail(rt, busy), lambda d: d.run.state is RunState.RUNNING)
        waiting = await submit(rt, make_job("waiting", now=now()))
        # One slot, busy: the second task run is claimed ahead and waits for the slot.
        await eventually(
            lambda: detail(rt, waiting), lambda d: d.task_runs[0].state is TaskRunState.RUNNING
        )

        await rt.pool.drain(0.2)
    finally:
        pool.cancel()
        await asyncio.gather(pool, return_exceptions=True)

    handed_back = await detail(rt, waiting)
    assert handed_back.task_runs[0].state is TaskRunState.QUEUED
    assert handed_back.task_runs[0].attempt == 1 and handed_back.attempts == ()
    interrupted = await detail(rt, busy)
    assert interrupted.task_runs[0].state is TaskRunState.UP_FOR_RETRY
    assert [a.error for a in interrupted.attempts] == ["interrupted by worker shutdown"]


async def test_a_shell_success_records_exit_code_0_and_a_retry_keeps_the_run_start(
    engine: Embedded,
) -> None:
    ok = await submit(engine, make_job("ok", now=now(), task=shell_task("true")))
    done = await eventually(lambda: detail(engine, ok), finished)
    assert done.task_runs[0].exit_code == 0
    assert [a.exit_code for a in done.attempts] == [0]

    failing = await submit(engine, make_job("no", now=now(), task=shell_task("false")))
    first = await eventually(lambda: detail(engine, failing), finished)
    assert first.run.state is RunState.FAILED and first.run.started_at is not None

    await engine.services.retry_run(failing.run.id)
    again = await eventually(
        lambda: detail(engine, failing), lambda d: finished(d) and len(d.attempts) == 2
    )
    assert again.run.started_at == first.run.started_at  # the run's history is not rewritten
    assert again.task_runs[0].attempt == 2
