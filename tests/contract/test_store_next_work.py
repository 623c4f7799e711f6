"""Store contract: ``next_work``, the scheduler pass's first read, says in one read what the
reads it stands for would find (``next_fire_at``, ``next_due_at``, ``due_task_runs(…,
after=…)``, ``running_backfills``)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from tests.contract.factory import T0, at, make_job, make_run, shell_task
from tickwork.core.backfill import Backfill, BackfillMode, BackfillState, Reprocess
from tickwork.core.model import Job, Pool, RunTrigger, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import NextWork
from tickwork.store import SqlStore

S = TaskRunState
NOTHING = NextWork(fire_at=None, due_at=None, ahead_at=None, backfilling=False)


async def _agrees(store: SqlStore, work: NextWork, after: float) -> None:
    """``work`` says what the reads it stands for say."""
    assert work.fire_at == await store.next_fire_at()
    assert work.due_at == await store.next_due_at()
    ahead = await store.due_task_runs(at(10_000), 1000, after=at(after))
    assert work.ahead_at == min((tr.due_at for tr in ahead), default=None)
    assert work.backfilling == bool(await store.running_backfills(10))


async def test_next_work_of_an_empty_store_is_nothing(store: SqlStore) -> None:
    assert await store.next_work(at(0)) == NOTHING


async def test_next_work_finds_the_earliest_fire_due_and_ahead_time(store: SqlStore) -> None:
    cron = make_job("cron", cron="* * * * *", next_fire_at=at(90))
    paused = make_job("paused", cron="* * * * *", next_fire_at=at(30), paused=True)
    job = make_job("at")
    runs = [make_run(job, at(d)) for d in (-20, 5, 40)]
    retry = make_run(job, at(-30), state=S.UP_FOR_RETRY)
    queued = make_run(job, at(-60), state=S.QUEUED)  # handed out already: not waiting
    await store.create_jobs([(cron, []), (paused, []), (job, [*runs, retry, queued])])

    work = await store.next_work(at(1))

    assert work == NextWork(fire_at=at(90), due_at=at(-30), ahead_at=at(5), backfilling=False)
    await _agrees(store, work, 1)
    assert (await store.next_work(at(5))).ahead_at == at(40)  # strictly after ``after``
    assert (await store.next_work(at(40))).ahead_at is None


async def test_next_work_leaves_out_paused_jobs_and_gated_task_runs_ahead(
    store: SqlStore,
) -> None:
    paused = make_job("paused", paused=True)
    await store.create_jobs([(paused, [make_run(paused, at(-10))])])
    assert await store.next_work(at(0)) == NOTHING

    await store.set_pool(Pool(name="db", slots=1), T0)
    pooled = _pooled_job("pooled")
    pending = new_run(pooled, at(30), trigger=RunTrigger.MANUAL, now=T0, make_id=new_id)
    await store.create_jobs([(pooled, [pending])])

    work = await store.next_work(at(0))

    # Due at its instant (the pool has room), but never handed out ahead of it.
    assert work == NextWork(fire_at=None, due_at=at(30), ahead_at=None, backfilling=False)
    await _agrees(store, work, 0)


async def test_next_work_says_whether_a_backfill_runs(store: SqlStore) -> None:
    job = make_job("daily", cron="0 0 * * *", next_fire_at=at(86_400))
    await store.create_jobs([(job, [])])
    backfill = _backfill(job)
    await store.create_backfill(backfill)

    work = await store.next_work(at(0))

    assert work.backfilling
    await _agrees(store, work, 0)
    running = frozenset({BackfillState.RUNNING})
    assert await store.set_backfill_state(backfill.id, running, BackfillState.PAUSED, at(1))
    assert not (await store.next_work(at(1))).backfilling


def _pooled_job(name: str) -> Job:
    return make_job(name, tasks=[dataclasses.replace(shell_task(), pool="db")])


def _backfill(job: Job) -> Backfill:
    return Backfill(
        id=new_id(),
        job_id=job.id,
        job_name=job.name,
        start=T0 - timedelta(days=3),
        end=T0,
        mode=BackfillMode.PARALLEL,
        max_active=2,
        chunk_size=1,
        reprocess=Reprocess.NONE,
        reverse=False,
        priority=0,
        state=BackfillState.RUNNING,
        total=3,
        created_at=T0,
        updated_at=T0,
    )
