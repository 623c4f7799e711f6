"""Store contract: work handed out ahead of time (``queue_ahead``) and taking it back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.contract.factory import T0, at, key, make_job, make_run
from tickwork.core.model import Job, RunState, RunTrigger, TaskRun, TaskRunState
from tickwork.store import SqlStore, open_store

S = TaskRunState


async def _waiting(store: SqlStore, job: Job, *dues: float) -> list[TaskRun]:
    """Scheduled single-task runs of ``job`` due ``dues`` seconds after T0."""
    new_runs = [make_run(job, at(d)) for d in dues]
    await store.create_jobs([(job, new_runs)])
    return [nr.task_runs[0] for nr in new_runs]


async def _task_run(store: SqlStore, tr: TaskRun) -> TaskRun:
    detail = await store.get_run(tr.run_id)
    assert detail is not None
    return detail.task_runs[0]


async def test_due_task_runs_after_reads_only_the_later_part_of_the_window(
    store: SqlStore,
) -> None:
    trs = await _waiting(store, make_job("j"), 1, 60, 120, 400)
    ids = [tr.id for tr in await store.due_task_runs(at(300), 10, after=at(1))]
    assert ids == [trs[1].id, trs[2].id]


async def test_queue_ahead_queues_for_the_due_instant_and_counts_from_it(store: SqlStore) -> None:
    later, overdue = await _waiting(store, make_job("j"), 120, -5)

    won = await store.queue_ahead([key(later), key(overdue)], at(0))

    assert {(tr.id, tr.state, tr.queued_at) for tr in won} == {
        (later.id, S.QUEUED, at(120)),  # claimable, and counted as waiting, from its instant
        (overdue.id, S.QUEUED, at(0)),  # already due: from now
    }
    detail = await store.get_run(later.run_id)
    assert detail is not None and detail.run.state is RunState.QUEUED
    assert await store.queue_ahead([key(later)], at(1)) == []  # once
    assert [tr.id for tr in await store.queued_task_runs(at(119), 10)] == [overdue.id]
    assert len(await store.queued_task_runs(at(120), 10)) == 2


async def test_queue_ahead_leaves_paused_jobs_alone(store: SqlStore) -> None:
    (tr,) = await _waiting(store, make_job("j"), 120)
    await store.set_paused(tr.job_id, True, at(0))
    assert await store.queue_ahead([key(tr)], at(0)) == []
    assert (await _task_run(store, tr)).state is S.SCHEDULED


async def test_pausing_takes_back_task_runs_queued_ahead_but_not_due_ones(
    store: SqlStore,
) -> None:
    job = make_job("j")
    ahead, due = await _waiting(store, job, 120, 10)
    await store.queue_ahead([key(ahead), key(due)], at(0))

    await store.set_paused(job.id, True, at(30))  # `due` became claimable at 10 s: it stays

    back, stays = await _task_run(store, ahead), await _task_run(store, due)
    assert (back.state, back.queued_at) == (S.SCHEDULED, None)
    assert (stays.state, stays.queued_at) == (S.QUEUED, at(10))
    detail = await store.get_run(ahead.run_id)
    assert detail is not None and detail.run.state is RunState.SCHEDULED
    # Resumed, the scheduler finds it again.
    await store.set_paused(job.id, False, at(31))
    assert [tr.id for tr in await store.due_task_runs(at(200), 10, after=at(31))] == [ahead.id]


async def test_pausing_a_cron_job_gives_back_its_fires_handed_out_ahead(store: SqlStore) -> None:
    job = make_job("cron", cron="* * * * *", next_fire_at=T0 + timedelta(minutes=3))
    fires = [make_run(job, T0 + timedelta(minutes=m)) for m in (1, 2)]
    await store.create_jobs([(job, fires)])
    await store.queue_ahead([key(nr.task_runs[0]) for nr in fires], T0)

    await store.set_paused(job.id, True, T0)

    assert (await store.list_runs(job_id=job.id)).runs == []
    stored = await store.get_job("cron")
    assert stored is not None and stored.next_fire_at == T0 + timedelta(minutes=1)


async def test_updating_a_cron_job_gives_back_fires_created_ahead_only(store: SqlStore) -> None:
    job = make_job("cron", cron="* * * * *", next_fire_at=T0 + timedelta(minutes=3))
    past = make_run(job, T0 - timedelta(minutes=1), state=S.QUEUED)
    fires = [make_run(job, T0 + timedelta(minutes=m)) for m in (1, 2)]
    manual = make_run(job, T0 + timedelta(hours=1), state=S.QUEUED, trigger=RunTrigger.MANUAL)
    await store.create_jobs([(job, [past, *fires, manual])])
    await store.queue_ahead([key(fires[0].task_runs[0])], T0)

    changed = replace(job, priority=7, updated_at=at(1))
    assert await store.update_job(changed, job.updated_at, reschedule=False)

    left = {r.id for r in (await store.list_runs(job_id=job.id)).runs}
    assert left == {past.run.id, manual.run.id}
    stored = await store.get_job("cron")
    assert stored is not None
    assert (stored.priority, stored.next_fire_at) == (7, T0 + timedelta(minutes=1))
    # A stale update changes nothing, fires created ahead included.
    assert not await store.update_job(changed, job.updated_at, reschedule=False)


async def test_deleting_a_job_deletes_its_fires_created_ahead(store: SqlStore) -> None:
    job = make_job("cron", cron="* * * * *", next_fire_at=T0 + timedelta(minutes=3))
    past = make_run(job, T0 - timedelta(minutes=1), state=S.QUEUED)
    ahead = make_run(job, T0 + timedelta(minutes=1))
    await store.create_jobs([(job, [past, ahead])])
    await store.queue_ahead([key(ahead.task_runs[0])], T0)

    await store.delete_job(job.id, T0)

    runs = (await store.list_runs(job_id=job.id)).runs
    assert [(r.id, r.state) for r in runs] == [(past.run.id, RunState.CANCELLED)]


@pytest.fixture
async def second_store(store_url: str, store: SqlStore) -> AsyncIterator[SqlStore]:
    opened = await open_store(store_url)
    yield opened
    await opened.close()


async def test_a_pause_racing_a_hand_off_never_leaves_work_handed_out(
    store: SqlStore, second_store: SqlStore
) -> None:
    for i in range(25):
        job = make_job(f"race-{i}")
        trs = await _waiting(store, job, *(60 + s for s in range(20)))
        keys = [key(tr) for tr in trs]
        await asyncio.gather(
            store.queue_ahead(keys, at(0)),  # the leader
            second_store.set_paused(job.id, True, at(0)),  # the API, another process
        )
        states = {(await _task_run(store, tr)).state for tr in trs}
        assert states == {S.SCHEDULED}, f"round {i}: {states}"
