"""Store contract: runs (create, read, list with keyset pages, cancel, retry)."""

from __future__ import annotations

import pytest

from tests.contract.factory import T0, at, key, make_job, make_run, outcome, shell_task
from tickwork.core.errors import Conflict, NotFound, ValidationError
from tickwork.core.model import Job, Run, RunState, TaskRunState
from tickwork.store import SqlStore
from tickwork.store.runs import encode_cursor


async def _job(store: SqlStore, name: str = "job", tasks: int = 1) -> Job:
    job = make_job(name, tasks=[shell_task(f"t{i}") for i in range(tasks)])
    await store.create_jobs([(job, [])])
    return job


async def test_create_runs_duplicate_logical_date_raises_conflict_and_writes_nothing(
    store: SqlStore,
) -> None:
    job = await _job(store)
    await store.create_runs([make_run(job, T0)])
    fresh, duplicate = make_run(job, at(60)), make_run(job, T0)
    with pytest.raises(Conflict) as caught:
        await store.create_runs([fresh, duplicate])
    assert caught.value.field == "logical_date"
    assert await store.get_run(fresh.run.id) is None
    assert len((await store.list_runs()).runs) == 1


async def test_get_run_unknown_is_none(store: SqlStore) -> None:
    assert await store.get_run("nope") is None


async def test_cancel_run_cancels_at_rest_and_requests_running(store: SqlStore) -> None:
    job = await _job(store, tasks=3)
    run = make_run(job, state=TaskRunState.QUEUED)
    await store.create_runs([run])
    running, resting, done = run.task_runs
    await store.claim([key(running), key(done)], "w1", at(1))
    await store.complete([outcome(done, TaskRunState.SUCCESS, at(2))])

    requested = await store.cancel_run(run.run.id, at(3))

    assert [(tr.id, tr.cancel_requested) for tr in requested] == [(running.id, True)]
    detail = await store.get_run(run.run.id)
    assert detail is not None
    by_id = {tr.id: tr for tr in detail.task_runs}
    assert by_id[resting.id].state == TaskRunState.CANCELLED
    assert by_id[resting.id].finished_at == at(3)
    assert by_id[done.id].state == TaskRunState.SUCCESS
    assert by_id[running.id].state == TaskRunState.RUNNING
    assert detail.run.state == RunState.RUNNING
    # The worker records the kill; then the run is cancelled.
    await store.complete([outcome(running, TaskRunState.CANCELLED, at(4))])
    after = await store.get_run(run.run.id)
    assert after is not None
    assert (after.run.state, after.run.finished_at) == (RunState.CANCELLED, at(4))


async def test_cancel_run_of_resting_run_finishes_it(store: SqlStore) -> None:
    job = await _job(store)
    run = make_run(job)
    await store.create_runs([run])
    assert await store.cancel_run(run.run.id, at(1)) == []
    detail = await store.get_run(run.run.id)
    assert detail is not None
    assert (detail.run.state, detail.run.finished_at) == (RunState.CANCELLED, at(1))
    assert await store.due_task_runs(at(100), 10) == []


async def test_cancel_and_retry_unknown_run_raise_not_found(store: SqlStore) -> None:
    with pytest.raises(NotFound):
        await store.cancel_run("nope", at(0))
    with pytest.raises(NotFound):
        await store.retry_run("nope", at(0))


async def test_retry_run_reschedules_failed_task_runs_with_one_more_attempt(
    store: SqlStore,
) -> None:
    job = await _job(store, tasks=2)
    run = make_run(job, state=TaskRunState.QUEUED)
    await store.create_runs([run])
    failing, passing = run.task_runs
    await store.claim([key(failing), key(passing)], "w1", at(1))
    await store.complete(
        [
            outcome(failing, TaskRunState.FAILED, at(2), error="boom"),
            outcome(passing, TaskRunState.SUCCESS, at(2)),
        ]
    )
    failed = await store.get_run(run.run.id)
    assert failed is not None
    assert failed.run.state == RunState.FAILED

    retried = await store.retry_run(run.run.id, at(10))

    assert [(tr.id, tr.attempt, tr.state) for tr in retried] == [
        (failing.id, 2, TaskRunState.SCHEDULED)
    ]
    assert retried[0].retry.max_attempts == 2
    assert retried[0].due_at == at(10)
    detail = await store.get_run(run.run.id)
    assert detail is not None
    assert detail.run.state == RunState.RUNNING
    assert detail.run.finished_at is None
    stored = {tr.id: tr for tr in detail.task_runs}[failing.id]
    assert stored == retried[0]
    assert [tr.id for tr in await store.due_task_runs(at(10), 10)] == [failing.id]
    assert await store.retry_run(run.run.id, at(11)) == []


async def test_list_runs_orders_newest_first_then_by_id(store: SqlStore) -> None:
    job_a, job_b = await _job(store, "a"), await _job(store, "b")
    new_runs = [make_run(j, d) for j in (job_a, job_b) for d in (T0, at(60), at(-60))]
    await store.create_runs(new_runs)
    listed = (await store.list_runs()).runs
    expected = sorted((n.run for n in new_runs), key=lambda r: (r.logical_date, r.id), reverse=True)
    assert listed == expected


async def test_list_runs_keyset_pages_are_stable_across_equal_logical_dates(
    store: SqlStore,
) -> None:
    jobs = [await _job(store, f"j{i}") for i in range(5)]
    # Every job has runs at the same three logical dates: many ties on logical_date.
    await store.create_runs([make_run(j, d) for j in jobs for d in (T0, at(60), at(-60))])
    everything = (await store.list_runs(limit=100)).runs
    seen: list[Run] = []
    cursor: str | None = None
    while True:
        page = await store.list_runs(limit=4, cursor=cursor)
        seen.extend(page.runs)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == everything
    assert len(seen) == 15


async def test_list_runs_filters_by_job_and_state(store: SqlStore) -> None:
    job_a, job_b = await _job(store, "a"), await _job(store, "b")
    queued = make_run(job_a, T0, state=TaskRunState.QUEUED)
    scheduled = make_run(job_a, at(60))
    other = make_run(job_b, T0)
    await store.create_runs([queued, scheduled, other])
    by_job = await store.list_runs(job_id=job_a.id)
    assert {r.id for r in by_job.runs} == {queued.run.id, scheduled.run.id}
    by_state = await store.list_runs(state="queued")
    assert [r.id for r in by_state.runs] == [queued.run.id]
    both = await store.list_runs(job_id=job_b.id, state="scheduled")
    assert [r.id for r in both.runs] == [other.run.id]


async def test_list_runs_dead_returns_runs_with_a_dead_lettered_task_run(store: SqlStore) -> None:
    job = await _job(store)
    dead, retried, fine = (make_run(job, at(i), state=TaskRunState.QUEUED) for i in range(3))
    await store.create_runs([dead, retried, fine])
    trs = [n.task_runs[0] for n in (dead, retried, fine)]
    await store.claim([key(tr) for tr in trs], "w1", at(5))
    await store.complete(
        [
            outcome(trs[0], TaskRunState.FAILED, at(6), error="x"),
            outcome(trs[1], TaskRunState.UP_FOR_RETRY, at(6), retry_at=at(60)),
            outcome(trs[2], TaskRunState.SUCCESS, at(6)),
        ]
    )
    page = await store.list_runs(state="dead")
    assert [r.id for r in page.runs] == [dead.run.id]
    assert page.runs[0].state == RunState.FAILED


async def test_list_runs_refuses_unknown_state_and_bad_cursor(store: SqlStore) -> None:
    with pytest.raises(ValidationError) as state_error:
        await store.list_runs(state="exploded")
    assert state_error.value.field == "state"
    assert "dead" in state_error.value.reason
    with pytest.raises(ValidationError) as cursor_error:
        await store.list_runs(cursor="!!not-a-cursor")
    assert cursor_error.value.field == "cursor"


async def test_list_runs_last_page_has_no_cursor(store: SqlStore) -> None:
    job = await _job(store)
    await store.create_runs([make_run(job, at(i)) for i in range(4)])
    first = await store.list_runs(limit=2)
    assert first.next_cursor is not None
    second = await store.list_runs(limit=2, cursor=first.next_cursor)
    assert len(second.runs) == 2
    assert second.next_cursor is None


async def test_a_cursor_holding_a_nul_is_refused_not_sent_to_the_database(
    store: SqlStore,
) -> None:
    forged = encode_cursor(T0, "run\x00")  # PostgreSQL would fail on it: a 500, not a 422
    for page in (store.list_runs, store.dead_letters):
        with pytest.raises(ValidationError) as caught:
            await page(cursor=forged)
        assert caught.value.field == "cursor"
