"""Store contract: jobs (create, read, list, pause, delete) and cron materialization."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from tests.contract.factory import T0, at, key, make_job, make_run, shell_task
from tickwork.core.errors import Conflict
from tickwork.core.model import (
    RetryPolicy,
    RunState,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRunState,
)
from tickwork.store import SqlStore


async def test_create_jobs_get_job_round_trips_every_field(store: SqlStore) -> None:
    tasks = (
        shell_task("extract"),
        Task(
            name="load",
            kind=TaskKind.HTTP,
            config={"method": "POST", "url": "https://example.org", "body": {"a": [1, 2]}},
            upstream=("extract",),
            timeout=12.5,
            retry=RetryPolicy(max_attempts=4, initial_delay=2.0),
        ),
    )
    schedule = Schedule(
        kind=ScheduleKind.CRON,
        cron="30 2 * * *",
        timezone="Europe/Berlin",
        start=at(-3600),
        end=at(86400 * 30),
    )
    job = dataclasses.replace(
        make_job("etl", tasks=tasks),
        schedule=schedule,
        tags=("nightly", "db"),
        metadata={"owner": "data", "n": 3},
        timeout=60.0,
        queue="gpu",
        priority=7,
        catchup=True,
        next_fire_at=at(600),
        last_fire_at=at(-600),
    )
    await store.create_jobs([(job, [])])
    assert await store.get_job("etl") == job


async def test_create_jobs_duplicate_name_raises_conflict_and_writes_nothing(
    store: SqlStore,
) -> None:
    first = make_job("a")
    await store.create_jobs([(first, [])])
    fresh, again = make_job("b"), make_job("a")
    with pytest.raises(Conflict) as caught:
        await store.create_jobs([(fresh, [make_run(fresh)]), (again, [make_run(again)])])
    assert caught.value.field == "name"
    assert "'a'" in caught.value.reason
    assert await store.get_job("b") is None
    assert (await store.list_runs()).runs == []


async def test_create_jobs_same_name_twice_in_one_batch_raises_conflict(store: SqlStore) -> None:
    with pytest.raises(Conflict) as caught:
        await store.create_jobs([(make_job("x"), []), (make_job("x"), [])])
    assert caught.value.field == "name"
    assert await store.list_jobs() == []


async def test_create_jobs_inserts_first_runs_with_the_jobs(store: SqlStore) -> None:
    job = make_job("now-job")
    new_run = make_run(job)
    await store.create_jobs([(job, [new_run])])
    detail = await store.get_run(new_run.run.id)
    assert detail is not None
    assert detail.run == new_run.run
    assert detail.task_runs == new_run.task_runs


async def test_list_jobs_orders_by_name_pages_after_and_hides_deleted(store: SqlStore) -> None:
    jobs = [make_job(n) for n in ("d", "b", "a", "c", "e")]
    await store.create_jobs([(j, []) for j in jobs])
    gone = next(j for j in jobs if j.name == "c")
    await store.delete_job(gone.id, at(1))
    assert [j.name for j in await store.list_jobs()] == ["a", "b", "d", "e"]
    assert [j.name for j in await store.list_jobs(limit=2)] == ["a", "b"]
    assert [j.name for j in await store.list_jobs(limit=2, after="b")] == ["d", "e"]


async def test_set_paused_toggles_and_reports_missing_jobs(store: SqlStore) -> None:
    job = make_job("p")
    await store.create_jobs([(job, [])])
    assert await store.set_paused(job.id, True, at(5)) is True
    paused = await store.get_job("p")
    assert paused is not None
    assert paused.paused is True
    assert paused.updated_at == at(5)
    assert await store.set_paused(job.id, False, at(6)) is True
    resumed = await store.get_job("p")
    assert resumed is not None
    assert resumed.paused is False
    assert await store.set_paused("no-such-id", True, at(7)) is False


async def test_delete_job_keeps_history_cancels_unfinished_and_returns_running(
    store: SqlStore,
) -> None:
    job = make_job("doomed", tasks=[shell_task("a"), shell_task("b")])
    run = make_run(job, state=TaskRunState.QUEUED)
    await store.create_jobs([(job, [run])])
    running_tr, resting_tr = run.task_runs
    await store.claim([key(running_tr)], "w1", at(1))

    returned = await store.delete_job(job.id, at(2))

    assert [tr.id for tr in returned] == [running_tr.id]
    assert returned[0].cancel_requested is True
    assert await store.get_job("doomed") is None
    detail = await store.get_run(run.run.id)
    assert detail is not None
    states = {tr.id: tr.state for tr in detail.task_runs}
    assert states == {running_tr.id: TaskRunState.RUNNING, resting_tr.id: TaskRunState.CANCELLED}
    assert await store.set_paused(job.id, True, at(3)) is False
    assert await store.delete_job(job.id, at(3)) == []
    # The name is free again for a new live job.
    await store.create_jobs([(make_job("doomed"), [])])


async def test_history_job_id_is_the_live_job_else_the_last_one_deleted(store: SqlStore) -> None:
    first, second, live = make_job("h"), make_job("h"), make_job("h")
    assert await store.history_job_id("h") is None
    await store.create_jobs([(first, [])])
    assert await store.history_job_id("h") == first.id
    await store.delete_job(first.id, at(1))
    assert await store.history_job_id("h") == first.id  # deleted, its history stays findable
    await store.create_jobs([(second, [])])
    await store.delete_job(second.id, at(2))
    assert await store.history_job_id("h") == second.id  # the one deleted last
    await store.create_jobs([(live, [])])
    assert await store.history_job_id("h") == live.id  # a live job of the name comes first


async def test_due_cron_jobs_returns_live_unpaused_cron_jobs_due_by_now(store: SqlStore) -> None:
    due = make_job("due", cron="* * * * *", next_fire_at=at(-10))
    later = make_job("later", cron="* * * * *", next_fire_at=at(60))
    paused = make_job("paused", cron="* * * * *", next_fire_at=at(-20), paused=True)
    deleted = make_job("deleted", cron="* * * * *", next_fire_at=at(-30))
    immediate = make_job("immediate", next_fire_at=at(-40))
    await store.create_jobs([(j, []) for j in (due, later, paused, deleted, immediate)])
    await store.delete_job(deleted.id, at(0))
    assert [j.name for j in await store.due_cron_jobs(at(0), 10)] == ["due"]
    assert await store.next_fire_at() == at(-10)
    assert [j.name for j in await store.due_cron_jobs(at(60), 10)] == ["due", "later"]
    assert [j.name for j in await store.due_cron_jobs(at(60), 1)] == ["due"]


async def test_next_fire_at_is_none_without_cron_jobs(store: SqlStore) -> None:
    assert await store.next_fire_at() is None


async def test_materialize_inserts_runs_advances_fires_returns_queued(store: SqlStore) -> None:
    job = make_job("cron", cron="*/5 * * * *", next_fire_at=T0)
    await store.create_jobs([(job, [])])
    fires = [make_run(job, T0, state=TaskRunState.QUEUED), make_run(job, at(-300))]
    nxt = T0 + timedelta(minutes=5)

    queued = await store.materialize(job.id, T0, nxt, fires)

    assert [tr.id for tr in queued] == [fires[0].task_runs[0].id]
    stored = await store.get_job("cron")
    assert stored is not None
    assert (stored.next_fire_at, stored.last_fire_at) == (nxt, T0)
    assert len((await store.list_runs(job_id=job.id)).runs) == 2


async def test_materialize_is_conditional_on_expected_next(store: SqlStore) -> None:
    job = make_job("cron", cron="*/5 * * * *", next_fire_at=T0)
    await store.create_jobs([(job, [])])
    stale = await store.materialize(job.id, at(-300), at(300), [make_run(job, T0)])
    assert stale == []
    assert (await store.list_runs()).runs == []
    stored = await store.get_job("cron")
    assert stored is not None
    assert stored.next_fire_at == T0


async def test_materialize_skips_a_fire_already_materialized(store: SqlStore) -> None:
    job = make_job("cron", cron="*/5 * * * *", next_fire_at=T0)
    first = make_run(job, T0, state=TaskRunState.QUEUED)
    await store.create_jobs([(job, [first])])
    nxt = T0 + timedelta(minutes=5)
    duplicate = make_run(job, T0, state=TaskRunState.QUEUED)
    fresh = make_run(job, nxt, state=TaskRunState.QUEUED)

    queued = await store.materialize(job.id, T0, nxt, [duplicate, fresh])

    assert [tr.run_id for tr in queued] == [fresh.run.id]
    listed = (await store.list_runs(job_id=job.id)).runs
    assert {r.id for r in listed} == {first.run.id, fresh.run.id}
    assert await store.get_run(duplicate.run.id) is None


async def test_materialize_with_no_runs_only_advances_next_fire(store: SqlStore) -> None:
    job = make_job("cron", cron="*/5 * * * *", next_fire_at=T0)
    await store.create_jobs([(dataclasses.replace(job, last_fire_at=at(-300)), [])])
    assert await store.materialize(job.id, T0, None, []) == []
    stored = await store.get_job("cron")
    assert stored is not None
    assert (stored.next_fire_at, stored.last_fire_at) == (None, at(-300))
    assert await store.next_fire_at() is None


async def test_materialize_for_deleted_job_writes_nothing(store: SqlStore) -> None:
    job = make_job("cron", cron="*/5 * * * *", next_fire_at=T0)
    await store.create_jobs([(job, [])])
    await store.delete_job(job.id, at(0))
    assert await store.materialize(job.id, T0, at(300), [make_run(job, T0)]) == []
    assert (await store.list_runs()).runs == []


async def test_created_run_state_is_stored_as_given(store: SqlStore) -> None:
    job = make_job("s")
    run = make_run(job, state=TaskRunState.QUEUED)
    await store.create_jobs([(job, [run])])
    detail = await store.get_run(run.run.id)
    assert detail is not None
    assert detail.run.state == RunState.QUEUED
