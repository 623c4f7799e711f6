"""Callbacks fired by the worker pool and the reaper, on a real SQLite store and MemoryBroker."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.fixtures import callbacks
from tests.fixtures.http_server import ServerState, serve_http
from tests.fixtures.sinks import eventually as until
from tests.helpers import eventually, make_job, python_task, shell_task
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import (
    Callback,
    CallbackEvent,
    Job,
    LogChunk,
    NewRun,
    RetryPolicy,
    RunDetail,
    RunState,
    RunTrigger,
    TaskKind,
    TaskRunState,
)
from tickwork.core.runs import new_run
from tickwork.hooks import CallbackErrorLog, Hooks
from tickwork.ids import new_id
from tickwork.ports import Store
from tickwork.scheduler.loop import Scheduler, SchedulerConfig, deliveries
from tickwork.security.ssrf import UrlGuard, parse_allow
from tickwork.worker import capture
from tickwork.worker.config import PoolConfig
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runners import build_runners, close_runners

TASKS = "tests.integration.engine_tasks"
CALLBACKS = "tests.fixtures.callbacks"
WORKER = "w-hooks"
ErrorReport = tuple[str, int, str]


def now() -> datetime:
    return datetime.now(UTC)


def py(name: str) -> Callback:
    return Callback(TaskKind.PYTHON, {"target": f"{CALLBACKS}:{name}"})


def web(url: str) -> Callback:
    return Callback(TaskKind.HTTP, {"url": url})


def with_hooks(job: Job, **hooks: Callback) -> Job:
    return replace(job, callbacks={CallbackEvent(k): v for k, v in hooks.items()})


@dataclass
class Rig:
    store: Store
    broker: MemoryBroker
    scheduler: Scheduler
    pool: WorkerPool
    hooks: Hooks
    errors: list[ErrorReport]
    error_log: CallbackErrorLog  # also told of every failed callback: into the task log


@pytest.fixture
def server() -> Iterator[tuple[str, ServerState]]:
    with serve_http() as served:
        yield served


def make_hooks(errors: list[ErrorReport], error_log: CallbackErrorLog | None = None) -> Hooks:
    def on_error(task_run_id: str, attempt: int, message: str) -> None:
        errors.append((task_run_id, attempt, message))
        if error_log is not None:
            error_log(task_run_id, attempt, message)

    return Hooks(
        url_guard=UrlGuard(parse_allow("127.0.0.0/8")).check, timeout=5.0, on_error=on_error
    )


@pytest.fixture
async def rig(sqlite_store: Store) -> AsyncIterator[Rig]:
    errors: list[ErrorReport] = []
    error_log = CallbackErrorLog(sqlite_store, now)
    hooks, broker, runners = make_hooks(errors, error_log), MemoryBroker(), build_runners()
    # Polls often rather than being woken by the pool: retries are due 50 ms later.
    scheduler = Scheduler(
        sqlite_store,
        broker,
        clock=now,
        rand=random.random,
        make_id=new_id,
        config=SchedulerConfig(max_sleep=0.05),
        hooks=hooks,
    )
    pool = WorkerPool(
        sqlite_store,
        broker,
        runners,
        PoolConfig(worker_id=WORKER),
        clock=now,
        rand=random.random,
        hooks=hooks,
    )
    loops = [asyncio.create_task(scheduler.run()), asyncio.create_task(pool.run())]
    yield Rig(sqlite_store, broker, scheduler, pool, hooks, errors, error_log)
    await pool.drain(2.0)
    for loop in loops:
        loop.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    await hooks.close(2.0)
    await error_log.flush(2.0)
    await close_runners(runners)
    capture.uninstall()


async def submit(rig: Rig, job: Job) -> NewRun:
    t = now()
    nr = new_run(
        job, t, trigger=RunTrigger.SCHEDULE, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )
    await rig.store.create_jobs([(job, [nr])])
    await rig.broker.publish(deliveries(nr.task_runs))
    return nr


async def finished(rig: Rig, nr: NewRun) -> RunDetail:
    async def probe() -> RunDetail | None:
        return await rig.store.get_run(nr.run.id)

    def done(d: RunDetail | None) -> bool:
        return d is not None and d.run.state in {RunState.SUCCESS, RunState.FAILED}

    detail = await eventually(probe, done)
    assert detail is not None
    return detail


async def test_failure_for_good_posts_on_failure_with_error_and_log_tail(
    rig: Rig, server: tuple[str, ServerState]
) -> None:
    base, state = server
    script = "echo one; echo two >&2; exit 3"
    job = make_job("hooks-fail", now=now(), task=shell_task("sh", "-c", script))
    nr = await submit(rig, with_hooks(job, on_failure=web(f"{base}/status/200")))

    detail = await finished(rig, nr)
    await until(lambda: len(state.requests) == 1)

    body = state.requests[0].json()
    task_run = detail.task_runs[0]
    assert body["event"] == "on_failure" and body["state"] == "failed"
    assert (body["job_name"], body["run_id"], body["task_name"]) == (
        "hooks-fail",
        nr.run.id,
        "main",
    )
    assert (body["task_run_id"], body["attempt"], body["worker_id"]) == (task_run.id, 1, WORKER)
    assert (body["error"], body["exit_code"]) == ("exit code 3", 3)
    assert body["logical_date"] == nr.run.logical_date.isoformat()
    *output, last = body["log_tail"].splitlines()
    assert sorted(output) == ["one", "two"]  # stdout and stderr, in the order they came
    assert last == "attempt 1: failed: exit code 3"
    assert rig.errors == []


async def test_retry_fires_on_retry_then_on_success(rig: Rig, tmp_path: Path) -> None:
    policy = RetryPolicy(max_attempts=2, initial_delay=0.05, jitter=0)
    counter = str(tmp_path / "calls")
    task = python_task(f"{TASKS}:fail_until", counter=counter, successes_after=1)
    task = replace(
        task,
        callbacks={
            CallbackEvent.ON_RETRY: py("record"),
            CallbackEvent.ON_SUCCESS: py("record_async"),
        },
    )
    nr = await submit(rig, make_job("hooks-retry", now=now(), retry=policy, task=task))

    await finished(rig, nr)
    await until(lambda: len(callbacks.calls("hooks-retry")) == 2)

    retry, success = callbacks.calls("hooks-retry")
    assert (retry.event, retry.attempt, retry.state) == (
        CallbackEvent.ON_RETRY,
        1,
        TaskRunState.UP_FOR_RETRY,
    )
    assert retry.error == "RuntimeError: failing call 1"
    assert "RuntimeError: failing call 1" in retry.log_tail  # the traceback, from stderr
    assert (success.event, success.attempt, success.state) == (
        CallbackEvent.ON_SUCCESS,
        2,
        TaskRunState.SUCCESS,
    )
    assert success.error is None and success.task_run_id == retry.task_run_id
    assert rig.errors == []


async def test_failing_callbacks_do_not_change_the_recorded_outcome(
    rig: Rig, server: tuple[str, ServerState], caplog: pytest.LogCaptureFixture
) -> None:
    base, _ = server
    policy = RetryPolicy(max_attempts=2, initial_delay=0.05, jitter=0)
    task = shell_task("sh", "-c", "echo out; exit 4")
    plain = make_job("hooks-plain", now=now(), retry=policy, task=task)
    broken = with_hooks(
        make_job("hooks-broken", now=now(), retry=policy, task=task),
        on_retry=py("fail"),
        on_failure=web(f"{base}/status/500"),
    )
    plain_run, broken_run = await submit(rig, plain), await submit(rig, broken)

    results = [await finished(rig, plain_run), await finished(rig, broken_run)]
    await until(lambda: len(rig.errors) == 2)

    assert _recorded(results[0]) == _recorded(results[1])
    assert results[1].run.state is RunState.FAILED
    broken_id = results[1].task_runs[0].id
    assert [(tr_id, attempt) for tr_id, attempt, _ in rig.errors] == [
        (broken_id, 1),
        (broken_id, 2),
    ]
    assert "on_retry callback failed: raised ValueError" in rig.errors[0][2]
    assert "on_failure callback failed: webhook POST" in rig.errors[1][2]
    assert any(
        r.name == "tickwork.hooks" and r.levelno == logging.WARNING and broken_id in r.getMessage()
        for r in caplog.records
    )


async def test_failed_callbacks_are_written_into_the_task_log_after_their_attempt(
    rig: Rig,
) -> None:
    policy = RetryPolicy(max_attempts=2, initial_delay=0.05, jitter=0)
    task = shell_task("sh", "-c", "exit 5")
    job = with_hooks(
        make_job("hooks-logged", now=now(), retry=policy, task=task),
        on_retry=py("fail"),
        on_failure=py("fail_async"),
    )
    nr = await submit(rig, job)
    task_run_id = (await finished(rig, nr)).task_runs[0].id

    def failed_callbacks(chunks: list[LogChunk]) -> list[LogChunk]:
        return [c for c in chunks if "callback failed" in c.data]

    chunks = await eventually(
        lambda: rig.store.read_logs(task_run_id), lambda cs: len(failed_callbacks(cs)) == 2
    )
    lines = [(c.attempt, c.stream, c.data) for c in chunks]
    assert lines == [
        (1, "system", "attempt 1: up_for_retry: exit code 5\n"),
        (
            1,
            "system",
            f"on_retry callback failed: raised ValueError: callback broke for {task_run_id}\n",
        ),
        (2, "system", "attempt 2: failed: exit code 5\n"),
        (2, "system", "on_failure callback failed: raised RuntimeError: async callback broke\n"),
    ]
    assert [c.seq for c in failed_callbacks(chunks)] == [(1 << 20) - 1, (2 << 20) - 1]


async def test_reaper_fires_on_failure_with_an_empty_log_tail_once(sqlite_store: Store) -> None:
    errors: list[ErrorReport] = []
    hooks = make_hooks(errors)
    scheduler = Scheduler(
        sqlite_store, MemoryBroker(), clock=now, rand=random.random, make_id=new_id, hooks=hooks
    )
    job = with_hooks(
        make_job("hooks-zombie", now=now()), on_failure=py("record"), on_retry=py("record")
    )
    t = now()
    nr = new_run(
        job, t, trigger=RunTrigger.SCHEDULE, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )
    await sqlite_store.create_jobs([(job, [nr])])
    claimed = await sqlite_store.claim([(nr.task_runs[0].id, 1)], "gone", t)
    try:
        assert await scheduler.fail_lost(claimed, now(), "worker lost: no heartbeat") == 1
        assert await scheduler.fail_lost(claimed, now(), "worker lost: no heartbeat") == 0
        await until(lambda: hooks.pending == 0)
    finally:
        await hooks.close(1.0)
    [context] = callbacks.calls("hooks-zombie")  # the second, refused outcome fired none
    # A lost attempt is retried from the infrastructure budget, even with one attempt.
    assert (context.event, context.state) == (CallbackEvent.ON_RETRY, TaskRunState.UP_FOR_RETRY)
    assert context.error == "worker lost: no heartbeat (worker gone)"
    assert context.log_tail == "" and context.worker_id == "gone"
    assert errors == []


def _recorded(detail: RunDetail) -> tuple[object, ...]:
    tr = detail.task_runs[0]
    attempts = sorted((a.attempt, a.state, a.error, a.exit_code) for a in detail.attempts)
    return detail.run.state, tr.state, tr.attempt, tr.error, tr.exit_code, attempts
