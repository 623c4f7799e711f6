"""No deadlocks between a worker's heartbeats, claims and completions under load: every
statement that locks task runs locks them in id order (heartbeats skip rows another
transaction holds), so no two transactions wait on each other in a circle.

Each run has two task runs: while the first ones are heartbeaten and completed (their runs
refreshed), the second ones of the same runs are claimed (their runs marked running), and a
stale duplicate claim of the first ones runs beside them. Checked on a private PostgreSQL
server, whose log must hold no ``deadlock detected`` and whose ``pg_stat_database.deadlocks``
(the same events, counted) must stay 0."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Iterator, Sequence
from datetime import timedelta

import psycopg
import pytest

from tests.contract.factory import T0, make_job, make_run, outcome, shell_task
from tests.pg import ThrowawayPostgres, find_bin_dir, free_port, libpq_url
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


async def _queued_batch(store: SqlStore, n: int) -> tuple[list[TaskRun], list[TaskRun]]:
    """``n`` runs of a job of two independent tasks, all queued: the firsts and the seconds."""
    job = make_job(f"job-{random.getrandbits(32)}", tasks=[shell_task("a"), shell_task("b")])
    runs = [make_run(job, T0 + timedelta(seconds=i), state=TaskRunState.QUEUED) for i in range(n)]
    await store.create_jobs([(job, runs)])
    return [run.task_runs[0] for run in runs], [run.task_runs[1] for run in runs]


async def _claim(stores: Sequence[SqlStore], queued: Sequence[TaskRun]) -> list[TaskRun]:
    """``queued`` claimed in two overlapping claims in opposite orders; each wins its rows once."""
    keys = _keys(queued)
    won = await asyncio.gather(
        stores[0].claim(keys, WORKER, T0), stores[1].claim(keys[::-1], WORKER, T0)
    )
    assert len(won[0]) + len(won[1]) == len(queued)
    return won[0] + won[1]


def _load(stores: Sequence[SqlStore], running: list[TaskRun]) -> list[Awaitable[object]]:
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
    return calls + [stores[2 + i % 2].complete(chunk) for i, chunk in enumerate(chunks)]


async def _round(stores: Sequence[SqlStore], n: int) -> list[TaskRun]:
    firsts, seconds = await _queued_batch(stores[0], n)
    running = await _claim(stores, firsts)
    second = asyncio.ensure_future(_claim(stores[4:], seconds))
    stale = asyncio.ensure_future(stores[4].claim(_keys(running), WORKER, T0))  # redelivered
    await asyncio.gather(*_load(stores, running), second, stale)
    assert stale.result() == []  # the firsts are running or done: a stale claim wins nothing
    await asyncio.gather(*_load(stores, second.result()))
    return firsts + seconds


async def test_heartbeats_claims_and_completions_never_deadlock(
    private_pg: ThrowawayPostgres,
) -> None:
    stores = [await open_store(private_pg.url) for _ in range(6)]
    try:
        await stores[0].migrate()
        for _ in range(ROUNDS):
            batch = await _round(stores, BATCH)
            left = [await stores[0].get_task_run(tr.id) for tr in random.sample(batch, 10)]
            assert all(tr is not None and tr.state == TaskRunState.SUCCESS for tr in left)
    finally:
        for store in stores:
            await store.close()
    log = private_pg.log_path.read_text()
    assert log.count("deadlock detected") == 0, log[-3000:]
    assert _deadlocks_counted(private_pg.url) == 0


def _deadlocks_counted(url: str) -> int:
    """``pg_stat_database.deadlocks`` once the stores' sessions ended (each flushes its
    counts as it exits)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        others = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        others += "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        deadline = time.monotonic() + 10
        while _one(conn, others) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the sessions' exit, with a deadline
        assert _one(conn, others) == 0, "the stores' sessions did not end"
        return _one(conn, "SELECT deadlocks FROM pg_stat_database WHERE datname = 'postgres'")


def _one(conn: psycopg.Connection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])
