"""Store contract: acting on one task run (get, cancel, retry), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from tests.contract.factory import at, key, make_job, make_run, outcome, shell_task
from tickwork.core.errors import NotFound
from tickwork.core.model import NewRun, RunDetail, RunState, TaskRun, TaskRunState
from tickwork.store import SqlStore

S = TaskRunState


async def _run(store: SqlStore, tasks: int = 2, state: S = S.QUEUED) -> NewRun:
    job = make_job("job", tasks=[shell_task(f"t{i}") for i in range(tasks)])
    await store.create_jobs([(job, [])])
    run = make_run(job, state=state)
    await store.create_runs([run])
    return run


async def _detail(store: SqlStore, run: NewRun) -> tuple[RunDetail, dict[str, TaskRun]]:
    detail = await store.get_run(run.run.id)
    assert detail is not None
    return detail, {tr.id: tr for tr in detail.task_runs}


async def _fail(store: SqlStore, *trs: TaskRun) -> None:
    await store.claim([key(tr) for tr in trs], "w1", at(1))
    await store.complete([outcome(tr, S.FAILED, at(2), error="boom") for tr in trs])


async def test_get_task_run_reads_one_or_none(store: SqlStore) -> None:
    run = await _run(store)
    assert await store.get_task_run(run.task_runs[0].id) == run.task_runs[0]
    assert await store.get_task_run("nope") is None


async def test_cancel_task_run_at_rest_cancels_it_alone_and_refreshes_the_run(
    store: SqlStore,
) -> None:
    run = await _run(store)
    first, second = run.task_runs

    assert await store.cancel_task_run(first.id, at(3)) == []

    detail, by_id = await _detail(store, run)
    assert (by_id[first.id].state, by_id[first.id].finished_at) == (S.CANCELLED, at(3))
    assert by_id[second.id].state == S.QUEUED
    assert detail.run.state == RunState.RUNNING  # one task over, one still to go
    await store.cancel_task_run(second.id, at(4))
    detail, _ = await _detail(store, run)
    assert (detail.run.state, detail.run.finished_at) == (RunState.CANCELLED, at(4))


async def test_cancel_task_run_running_requests_the_kill_and_tells_its_worker(
    store: SqlStore,
) -> None:
    run = await _run(store, tasks=1)
    (tr,) = run.task_runs
    await store.claim([key(tr)], "w1", at(1))

    requested = await store.cancel_task_run(tr.id, at(2))

    assert [(r.id, r.state, r.cancel_requested) for r in requested] == [(tr.id, S.RUNNING, True)]
    assert (await store.heartbeat([key(tr)], "w1", at(3))).cancelled == {tr.id}
    await store.complete([outcome(tr, S.CANCELLED, at(4))])
    detail, _ = await _detail(store, run)
    assert (detail.run.state, detail.run.finished_at) == (RunState.CANCELLED, at(4))


async def test_cancel_task_run_that_finished_changes_nothing(store: SqlStore) -> None:
    run = await _run(store, tasks=1)
    (tr,) = run.task_runs
    await store.claim([key(tr)], "w1", at(1))
    await store.complete([outcome(tr, S.SUCCESS, at(2))])
    before = await store.get_run(run.run.id)

    assert await store.cancel_task_run(tr.id, at(3)) == []

    assert await store.get_run(run.run.id) == before


async def test_retry_task_run_gives_one_dead_letter_another_attempt(store: SqlStore) -> None:
    run = await _run(store)
    retried_tr, left_tr = run.task_runs
    await _fail(store, retried_tr, left_tr)

    retried = await store.retry_task_run(retried_tr.id, at(10))

    assert [(tr.id, tr.state, tr.attempt) for tr in retried] == [(retried_tr.id, S.SCHEDULED, 2)]
    assert (retried[0].retry.max_attempts, retried[0].due_at) == (2, at(10))
    detail, by_id = await _detail(store, run)
    assert by_id[retried_tr.id] == retried[0]
    assert (by_id[left_tr.id].state, by_id[left_tr.id].attempt) == (S.FAILED, 1)
    assert (detail.run.state, detail.run.finished_at) == (RunState.RUNNING, None)
    assert [tr.id for tr in await store.due_task_runs(at(10), 10)] == [retried_tr.id]
    # It is scheduled now: a second retry finds nothing to do and changes nothing.
    assert await store.retry_task_run(retried_tr.id, at(11)) == []
    assert (await _detail(store, run))[0] == detail


async def test_retry_task_run_replays_a_cancelled_one(store: SqlStore) -> None:
    run = await _run(store, tasks=1)
    (tr,) = run.task_runs
    await store.cancel_task_run(tr.id, at(1))

    retried = await store.retry_task_run(tr.id, at(2))

    assert [(r.state, r.attempt, r.finished_at) for r in retried] == [(S.SCHEDULED, 2, None)]
    detail, _ = await _detail(store, run)
    assert (detail.run.state, detail.run.finished_at) == (RunState.SCHEDULED, None)


@pytest.mark.parametrize("state", [S.SCHEDULED, S.QUEUED])
async def test_retry_task_run_that_is_not_dead_changes_nothing(store: SqlStore, state: S) -> None:
    run = await _run(store, tasks=1, state=state)
    before = await store.get_run(run.run.id)
    assert await store.retry_task_run(run.task_runs[0].id, at(1)) == []
    assert await store.get_run(run.run.id) == before


async def test_cancel_and_retry_of_an_unknown_task_run_raise_not_found(store: SqlStore) -> None:
    for action in (store.cancel_task_run, store.retry_task_run):
        with pytest.raises(NotFound) as caught:
            await action("nope", at(0))
        assert (caught.value.kind, caught.value.key) == ("task_run", "nope")
