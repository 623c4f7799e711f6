"""No deadlocks between a worker's heartbeats, claims and completions under load: every
statement that locks task runs locks them in id order (heartbeats skip rows another
transaction holds), so no two transactions wait on each other in a circle. Checked on a
private PostgreSQL server, whose log must hold no ``deadlock detected``."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Iterator, Sequence
from datetime import timedelta

import pytest

from tests.contract.factory import T0, make_job, make_run, outcome
from tests.pg import ThrowawayPostgres, find_bin_dir, free_port
from tickwork.core.model import TaskRun, TaskRunState
from tickwork.ports import TaskKey
from tickwork.store import SqlStore, open_store

pytestmark = pytest.mark.postgres

ROUNDS = 12
BATCH = 120
WORKER = "w1"


@pytest.fixture(scope="module")
def private_pg() -> Iterator[ThrowawayPostgres]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.fail("no PostgreSQL binaries (initdb, pg_ctl) to start a private server")
    # Deadlocks are looked for after 50 ms of waiting (1 s by default), so each is found fast.
    server = ThrowawayPostgres(bin_dir, free_port(), settings={"deadlock_timeout": "50ms"})
    server.start()
    yield server
    server.stop()


def _keys(items: Sequence[TaskRun]) -> list[TaskKey]:
    return [(tr.id, tr.attempt) for tr in items]


async def _claimed_batch(stores: Sequence[SqlStore], n: int) -> list[TaskRun]:
    """``n`` task runs queued, then claimed in two overlapping claims in opposite orders."""
    job = make_job(f"job-{random.getrandbits(32)}")
    runs = [make_run(job, T0 + timedelta(seconds=i), state=TaskRunState.QUEUED) for i in range(n)]
    await stores[0].create_jobs([(job, runs)])
    queued = [tr for run in runs for tr in run.task_runs]
    keys = _keys(queued)
    won = await asyncio.gather(
        stores[0].claim(keys, WORKER, T0), stores[1].claim(keys[::-1], WORKER, T0)
    )
    assert len(won[0]) + len(won[1]) == n  # each claimed once
    return won[0] + won[1]


async def _load(stores: Sequence[SqlStore], running: list[TaskRun]) -> None:
    """Heartbeats in reverse and shuffled orders beside completions in overlapping chunks."""
    keys = _keys(running)
    shuffled = random.sample(keys, len(keys))
    done = T0 + timedelta(seconds=1)
    outcomes = [outcome(tr, TaskRunState.SUCCESS, done) for tr in running]
    random.shuffle(outcomes)
    chunks = [outcomes[i : i + 40] for i in range(0, len(outcomes), 30)]  # overlapping
    calls: list[Awaitable[object]] = [
        stores[0].heartbeat(keys[::-1], WORKER, done),
        stores[1].heartbeat(shuffled, WORKER, done),
    ]
    calls += [stores[2 + i % 2].complete(chunk) for i, chunk in enumerate(chunks)]
    await asyncio.gather(*calls)


async def test_heartbeats_claims_and_completions_never_deadlock(
    private_pg: ThrowawayPostgres,
) -> None:
    stores = [await open_store(private_pg.url) for _ in range(4)]
    try:
        await stores[0].migrate()
        for _ in range(ROUNDS):
            running = await _claimed_batch(stores, BATCH)
            await _load(stores, running)
            left = [await stores[0].get_task_run(tr.id) for tr in running[:5]]
            assert all(tr is not None and tr.state == TaskRunState.SUCCESS for tr in left)
    finally:
        for store in stores:
            await store.close()
    log = private_pg.log_path.read_text()
    assert log.count("deadlock detected") == 0, log[-3000:]
