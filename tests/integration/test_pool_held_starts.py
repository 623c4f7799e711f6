"""A backlog of task runs claimed ahead: heartbeats mark the waiting ones unstarted, and each
``start`` batch also starts the held task runs next in line, so their slots wait for no start
of their own. Every task run still runs once, on its first attempt.

Real stores (SQLite and PostgreSQL), the python runner on threads; heartbeats every 0.2 s.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers import eventually, make_job
from tests.integration.test_pool_abandon import insert
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import NewRun, Task, TaskKind, TaskRunState
from tickwork.ports import Store, TaskKey
from tickwork.scheduler.loop import deliveries
from tickwork.worker.config import PoolConfig
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runners import build_runners, close_runners

S = TaskRunState
CONCURRENCY = 2
RUNS = 40


def now() -> datetime:
    return datetime.now(UTC)


def short_task(pidfile: Path) -> Task:
    target = "tests.integration.engine_tasks:sleep_with_pid"
    config = {"target": target, "kwargs": {"pidfile": str(pidfile), "seconds": 0.02}}
    return Task(name="main", kind=TaskKind.PYTHON, config=config)


async def test_held_task_runs_are_started_ahead_of_their_slots(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[list[TaskKey]] = []
    started = store.start

    async def recorded(keys: Sequence[TaskKey], worker_id: str, at: datetime) -> set[TaskKey]:
        batches.append(list(keys))
        return await started(keys, worker_id, at)

    monkeypatch.setattr(store, "start", recorded)
    task = short_task(tmp_path / "pid")
    made = [await insert(store, make_job(f"j{i}", now=now(), task=task)) for i in range(RUNS)]
    broker = MemoryBroker()
    runners = build_runners(python_isolation="thread")
    # Short expected tasks: the first fetch claims them all ahead of two slots.
    config = PoolConfig(
        worker_id="w1",
        concurrency=CONCURRENCY,
        heartbeat_interval=0.2,
        expected_duration=0.001,
    )
    pool = WorkerPool(store, broker, runners, config, clock=now, rand=random.random)
    loops = asyncio.create_task(pool.run())
    try:
        await broker.publish(deliveries([tr for nr in made for tr in nr.task_runs]))
        await eventually(lambda: _finished(store, made), lambda n: n == RUNS, timeout=30)
    finally:
        await pool.drain(0.5)
        loops.cancel()
        await asyncio.gather(loops, return_exceptions=True)
        await close_runners(runners)

    for nr in made:
        found = await store.get_run(nr.run.id)
        assert found is not None
        assert [(tr.state, tr.attempt) for tr in found.task_runs] == [(S.SUCCESS, 1)]
    started_keys = {k for batch in batches for k in batch}
    assert len(started_keys) > RUNS // 2  # the backlog outlived many heartbeats
    # Started ahead: batches hold more than the slots, and are far fewer than the runs.
    # (Each held task run starting on its own slot would make batches of at most two.)
    assert max(len(batch) for batch in batches) > CONCURRENCY
    assert len(batches) < len(started_keys) / CONCURRENCY


async def _finished(store: Store, made: list[NewRun]) -> int:
    done = 0
    for nr in made:
        found = await store.get_run(nr.run.id)
        if found is not None and found.task_runs[0].state == S.SUCCESS:
            done += 1
    return done
