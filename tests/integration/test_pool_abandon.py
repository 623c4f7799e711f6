"""A worker presumed lost: the reaper's decision wins, and the worker stops what it lost.

Real stores (SQLite and PostgreSQL), the real runners, and the scheduler's own reaper step
(``Scheduler.fail_lost`` over ``stale_running``); heartbeats every 0.1 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import eventually, make_job, shell_task
from tickwork.broker.memory import MemoryBroker
from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import Job, NewRun, RetryPolicy, RunTrigger, Task, TaskKind, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Beat, Broker, Store
from tickwork.scheduler.loop import Scheduler, deliveries
from tickwork.worker.config import PoolConfig
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runners import build_runners, close_runners

S = TaskRunState


def now() -> datetime:
    return datetime.now(UTC)


@contextlib.asynccontextmanager
async def running_pool(
    store: Store, broker: Broker, *, concurrency: int = 4, expected_duration: float = 1.0
) -> AsyncIterator[asyncio.Task[None]]:
    runners = build_runners()
    config = PoolConfig(
        worker_id="w1",
        concurrency=concurrency,
        heartbeat_interval=0.1,
        expected_duration=expected_duration,
    )
    pool = WorkerPool(store, broker, runners, config, clock=now, rand=random.random)
    task = asyncio.create_task(pool.run())
    try:
        yield task
    finally:
        await pool.drain(0.5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await close_runners(runners)


def reaper(store: Store, broker: Broker) -> Scheduler:
    return Scheduler(store, broker, clock=now, rand=random.random, make_id=new_id)


async def insert(store: Store, job: Job) -> NewRun:
    t = now()
    nr = new_run(job, t, trigger=RunTrigger.SCHEDULE, now=t, make_id=new_id, state=S.QUEUED)
    await store.create_jobs([(job, [nr])])
    return nr


async def task_run_of(store: Store, nr: NewRun) -> tuple[S, int, str | None]:
    found = await store.get_run(nr.run.id)
    assert found is not None
    tr = found.task_runs[0]
    return tr.state, tr.attempt, tr.worker_id


def pid_in(path: Path) -> int:
    return int(path.read_text()) if path.exists() and path.read_text() else 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie not yet reaped counts as gone
    return stat.exists() and stat.read_text().split()[2] != "Z"


def shell_sleeper(pidfile: Path) -> Task:
    return shell_task("sh", "-c", f"echo $$ > {pidfile}; exec sleep 60")


def python_sleeper(pidfile: Path) -> Task:
    target = "tests.integration.engine_tasks:sleep_with_pid"
    config = {"target": target, "kwargs": {"pidfile": str(pidfile), "seconds": 60}}
    return Task(name="main", kind=TaskKind.PYTHON, config=config)


@pytest.mark.parametrize("kind", ["shell", "python"])
async def test_a_reaped_attempt_is_stopped_by_its_worker(
    store: Store, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    pidfile = tmp_path / "pid"
    task = shell_sleeper(pidfile) if kind == "shell" else python_sleeper(pidfile)
    retry = RetryPolicy(max_attempts=1)
    nr = await insert(store, make_job(f"reaped-{kind}", now=now(), task=task, retry=retry))
    broker = MemoryBroker()
    async with running_pool(store, broker):
        await broker.publish(deliveries(nr.task_runs))
        pid = await eventually(lambda: _pid(pidfile), bool)
        # The reaper takes the worker for lost (as after a freeze) and retries the attempt.
        (running,) = await store.stale_running(now() + timedelta(seconds=5), 10)
        assert await reaper(store, broker).fail_lost([running], now(), "worker lost") == 1

        await eventually(lambda: _alive(pid), lambda up: not up)
        # Its next attempt is someone else's business; this worker wrote no outcome for the
        # old one (the store keeps the reaper's), and it said so once.
        _, attempt, _ = await task_run_of(store, nr)
    assert attempt == 2
    abandoned = [r for r in caplog.records if "abandoned" in r.getMessage()]
    assert len(abandoned) == 1, [r.getMessage() for r in abandoned]


async def _pid(path: Path) -> int:
    return pid_in(path)


async def _alive(pid: int) -> bool:
    return alive(pid)


async def test_a_task_run_claimed_ahead_is_requeued_unspent_when_its_worker_dies(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = tmp_path / "pid"
    retry = RetryPolicy(max_attempts=1)
    busy = await insert(store, make_job("busy", now=now(), task=shell_sleeper(pidfile)))
    ahead = await insert(store, make_job("ahead", now=now(), task=shell_task("true"), retry=retry))
    # Behind it in line: started ahead by the batch that starts ``ahead``, too late as well.
    behind = await insert(store, make_job("behind", now=now(), task=shell_task("true")))
    broker = MemoryBroker()
    runners = build_runners()
    # One slot and short expected tasks: the second task run is claimed ahead and waits.
    config = PoolConfig(
        worker_id="w1", concurrency=1, heartbeat_interval=0.1, expected_duration=0.01
    )
    pool = WorkerPool(store, broker, runners, config, clock=now, rand=random.random)
    loops = asyncio.create_task(pool.run())
    try:
        await broker.publish(deliveries([*busy.task_runs, *ahead.task_runs, *behind.task_runs]))
        pid = await eventually(lambda: _pid(pidfile), bool)
        unstarted = (S.RUNNING, None)
        await eventually(lambda: _started_at(store, ahead), lambda s: s == unstarted)
        await eventually(lambda: _started_at(store, behind), lambda s: s == unstarted)
        monkeypatch.setattr(store, "heartbeat", _cut_off)  # cut off: its beats fail

        lost = await store.stale_running(now() + timedelta(seconds=5), 10)
        # What the reaper re-sends goes to the other workers (not this one).
        assert await reaper(store, MemoryBroker()).fail_lost(lost, now(), "worker lost") == 3
        os.kill(pid, signal.SIGKILL)  # its slot frees: the held one must not start now
        await eventually(lambda: _active(pool), lambda n: n == 0)
    finally:
        loops.cancel()
        await asyncio.gather(loops, return_exceptions=True)
        await close_runners(runners)

    assert await task_run_of(store, ahead) == (S.QUEUED, 1, None)  # no attempt spent
    assert await task_run_of(store, behind) == (S.QUEUED, 1, None)  # and it did not run
    _, attempt, _ = await task_run_of(store, busy)
    assert attempt == 2  # the one that ran was judged (retried from the lost-worker budget)
    assert any("not started: the store gave it back" in r.getMessage() for r in caplog.records)


async def _cut_off(*_: object, **__: object) -> Beat:
    raise StoreUnavailable("cut off")


async def _active(pool: WorkerPool) -> int:
    return pool.active_count


async def _started_at(store: Store, nr: NewRun) -> tuple[S, datetime | None]:
    found = await store.get_run(nr.run.id)
    assert found is not None
    tr = found.task_runs[0]
    return tr.state, tr.started_at
