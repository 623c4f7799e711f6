"""Store contract: due work, queueing, claims, heartbeats, completion, zombies, requeue."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tests.contract.factory import T0, at, key, make_job, make_run, outcome, shell_task
from tickwork.core.model import Job, NewRun, RunState, TaskRun, TaskRunState
from tickwork.store import SqlStore, open_store

S = TaskRunState


async def _queued(store: SqlStore, n: int = 1, name: str = "job") -> list[TaskRun]:
    """``n`` single-task runs of one job, already queued."""
    job = make_job(name)
    new_runs = [make_run(job, at(i), state=S.QUEUED) for i in range(n)]
    await store.create_jobs([(job, new_runs)])
    return [nr.task_runs[0] for nr in new_runs]


async def _running(store: SqlStore, n: int = 1) -> list[TaskRun]:
    trs = await _queued(store, n)
    return await store.claim([key(tr) for tr in trs], "w1", at(100))


async def _run_state(store: SqlStore, tr: TaskRun) -> RunState:
    detail = await store.get_run(tr.run_id)
    assert detail is not None
    return detail.run.state


async def test_due_task_runs_orders_by_priority_then_due_at(store: SqlStore) -> None:
    low, high = make_job("low", priority=0), make_job("high", priority=5)
    runs: list[tuple[Job, list[NewRun]]] = [
        (low, [make_run(low, at(-30)), make_run(low, at(-20)), make_run(low, at(50))]),
        (high, [make_run(high, at(-10)), make_run(high, at(-40), state=S.QUEUED)]),
    ]
    await store.create_jobs(runs)
    due = await store.due_task_runs(at(0), 10)
    assert [(tr.job_name, tr.due_at) for tr in due] == [
        ("high", at(-10)),
        ("low", at(-30)),
        ("low", at(-20)),
    ]
    assert len(await store.due_task_runs(at(0), 2)) == 2
    assert await store.next_due_at() == at(-30)


async def test_next_due_at_is_none_when_nothing_waits(store: SqlStore) -> None:
    await _queued(store)
    assert await store.next_due_at() is None


async def test_mark_queued_moves_dispatchable_rows_once_and_checks_attempt(
    store: SqlStore,
) -> None:
    job = make_job("j")
    new_run = make_run(job, T0)
    await store.create_jobs([(job, [new_run])])
    tr = new_run.task_runs[0]
    assert await store.mark_queued([(tr.id, tr.attempt + 1)], at(1)) == []

    moved = await store.mark_queued([key(tr)], at(1))

    assert [(m.id, m.state, m.queued_at) for m in moved] == [(tr.id, S.QUEUED, at(1))]
    assert await store.mark_queued([key(tr)], at(2)) == []
    assert await _run_state(store, tr) == RunState.QUEUED
    assert await store.due_task_runs(at(10), 10) == []


async def test_queued_task_runs_lists_unclaimed_rows_queued_long_ago(store: SqlStore) -> None:
    old, young = await _queued(store, 2)
    await store.claim([key(young)], "w1", at(5))
    assert [tr.id for tr in await store.queued_task_runs(at(100), 10)] == [old.id]
    assert await store.queued_task_runs(at(-1), 10) == []


async def test_queued_counts_counts_the_rows_queued_task_runs_would_list_by_queue(
    store: SqlStore,
) -> None:
    old, young, _ = await _queued(store, 3)
    fast = dataclasses.replace(make_job("fast"), queue="fast")
    await store.create_jobs([(fast, [make_run(fast, at(0), state=S.QUEUED)])])
    await store.claim([key(young)], "w1", at(5))

    assert await store.queued_counts(at(100), 10) == {"default": 2, "fast": 1}
    assert await store.queued_counts(at(0), 10) == {"default": 1, "fast": 1}
    listed = await store.queued_task_runs(at(100), 2)  # the oldest two only, as counted
    counted = await store.queued_counts(at(100), 2)
    assert sum(counted.values()) == 2
    assert counted == {q: sum(tr.queue == q for tr in listed) for q in counted}
    assert old.id in {tr.id for tr in listed}
    assert await store.queued_counts(at(-1), 10) == {}


async def test_claim_wins_once_and_ignores_stale_attempts(store: SqlStore) -> None:
    tr, other = await _queued(store, 2)
    assert await store.claim([(tr.id, tr.attempt + 1)], "w1", at(1)) == []

    won = await store.claim([key(tr)], "w1", at(1))

    assert [(w.id, w.state, w.worker_id, w.started_at, w.heartbeat_at) for w in won] == [
        (tr.id, S.RUNNING, "w1", at(1), at(1))
    ]
    assert await store.claim([key(tr), key(tr)], "w2", at(2)) == []
    assert await _run_state(store, tr) == RunState.RUNNING
    detail = await store.get_run(tr.run_id)
    assert detail is not None
    assert detail.run.started_at == at(1)
    assert await _run_state(store, other) == RunState.QUEUED


async def test_claim_by_two_racing_stores_gives_each_row_to_one(store_url: str) -> None:
    stores = [await open_store(store_url) for _ in range(2)]
    try:
        await stores[0].truncate_all()
        trs = await _queued(stores[0], 50)
        keys = [key(tr) for tr in trs]
        results = await asyncio.gather(
            *(s.claim(keys, f"w{i}", at(1)) for i, s in enumerate(stores))
        )
        ids = [tr.id for batch in results for tr in batch]
        assert sorted(ids) == sorted(tr.id for tr in trs)
    finally:
        for s in stores:
            await s.close()


async def test_claim_batch_larger_than_one_statement(store: SqlStore) -> None:
    trs = await _queued(store, 1200)
    won = await store.claim([key(tr) for tr in trs], "w1", at(1))
    assert len(won) == 1200
    assert {tr.state for tr in won} == {S.RUNNING}


async def test_heartbeat_refreshes_own_running_rows_and_reports_cancels(store: SqlStore) -> None:
    a, b = await _running(store, 2)
    await store.cancel_run(b.run_id, at(150))

    beat = await store.heartbeat([key(a), key(b)], "w1", at(200))

    assert (beat.cancelled, beat.abandoned) == ({b.id}, set())
    assert (await store.heartbeat([key(a)], "someone-else", at(300))).cancelled == set()
    assert (await store.heartbeat([(a.id, a.attempt + 1)], "w1", at(300))).cancelled == set()
    assert await store.stale_running(at(200), 10) == []
    zombies = await store.stale_running(at(201), 10)
    assert {tr.heartbeat_at for tr in zombies} == {at(200)}


async def test_heartbeat_reports_attempts_the_worker_no_longer_holds(store: SqlStore) -> None:
    a, b, c = await _running(store, 3)
    await store.complete([outcome(a, S.FAILED, at(150))])  # the reaper failed it
    stolen = (c.id, c.attempt + 1)

    beat = await store.heartbeat([key(a), key(b), stolen], "w1", at(200))
    other = await store.heartbeat([key(b)], "w2", at(200))

    assert beat.abandoned == {key(a), stolen}
    assert other.abandoned == {key(b)}
    assert [tr.heartbeat_at for tr in await store.stale_running(at(201), 10)] == [at(100), at(200)]


async def test_held_task_run_is_requeued_without_spending_an_attempt(store: SqlStore) -> None:
    held, ran = await _running(store, 2)
    await store.heartbeat([key(held), key(ran)], "w1", at(110), held=[key(held), key(ran)])
    assert await store.start([key(ran)], "w1", at(120)) == {key(ran)}

    lost = await store.stale_running(at(200), 10)
    assert {tr.id: tr.started_at for tr in lost} == {held.id: None, ran.id: at(120)}
    back = await store.requeue_unstarted([key(held), key(ran)], at(200))

    assert [(tr.id, tr.state, tr.attempt) for tr in back] == [(held.id, S.QUEUED, held.attempt)]
    assert await store.start([key(held)], "w1", at(210)) == set()  # too late: not ours
    assert (await store.heartbeat([key(held)], "w1", at(210))).abandoned == {key(held)}
    (again,) = await store.claim([key(held)], "w2", at(220))
    assert (again.attempt, again.worker_id, again.started_at) == (held.attempt, "w2", at(220))


async def test_start_stamps_only_the_workers_own_keys_at_their_attempt(store: SqlStore) -> None:
    a, b, c = await _running(store, 3)
    await store.heartbeat([key(a), key(b), key(c)], "w1", at(110), held=[key(a), key(b), key(c)])
    wrong_attempt = (b.id, b.attempt + 1)

    started = await store.start([key(a), wrong_attempt, ("missing", 1)], "w1", at(120))
    assert await store.start([key(c)], "w2", at(120)) == set()  # another worker's

    assert started == {key(a)}
    stale = {tr.id: tr for tr in await store.stale_running(at(500), 10)}
    assert (stale[a.id].started_at, stale[a.id].heartbeat_at) == (at(120), at(120))
    assert (stale[b.id].started_at, stale[b.id].heartbeat_at) == (None, at(110))
    assert (stale[c.id].started_at, stale[c.id].heartbeat_at) == (None, at(110))


async def test_start_stamps_only_this_workers_running_attempts(store: SqlStore) -> None:
    mine, other, done = await _running(store, 3)
    await store.heartbeat([key(mine), key(other), key(done)], "w1", at(110), held=[key(mine)])
    await store.complete([outcome(done, S.SUCCESS, at(115))])
    asked = [key(mine), (other.id, other.attempt + 1), key(done), ("nope", 1)]

    assert await store.start(asked, "w1", at(120)) == {key(mine)}
    assert await store.start([key(other)], "w2", at(120)) == set()
    lost = {tr.id: tr.started_at for tr in await store.stale_running(at(200), 10)}
    assert lost == {mine.id: at(120), other.id: at(100)}


async def test_stale_running_returns_oldest_heartbeats_first(store: SqlStore) -> None:
    a, b = await _running(store, 2)
    await store.heartbeat([key(b)], "w1", at(150))
    assert [tr.id for tr in await store.stale_running(at(200), 10)] == [a.id, b.id]
    assert [tr.id for tr in await store.stale_running(at(120), 10)] == [a.id]
    assert [tr.id for tr in await store.stale_running(at(200), 1)] == [a.id]


async def test_complete_success_writes_history_and_finishes_run(store: SqlStore) -> None:
    (tr,) = await _running(store)
    done = outcome(tr, S.SUCCESS, at(110), exit_code=0)

    assert (await store.complete([done])).applied == [tr.id]

    detail = await store.get_run(tr.run_id)
    assert detail is not None
    (stored,) = detail.task_runs
    assert (stored.state, stored.finished_at, stored.exit_code) == (S.SUCCESS, at(110), 0)
    assert (detail.run.state, detail.run.finished_at) == (RunState.SUCCESS, at(110))
    (history,) = detail.attempts
    assert (history.attempt, history.state, history.started_at) == (1, S.SUCCESS, at(100))
    assert (history.finished_at, history.worker_id) == (at(110), "w1")
    # The same outcome again (a duplicate report) is stale and changes nothing.
    assert (await store.complete([done])).applied == []
    again = await store.get_run(tr.run_id)
    assert again is not None
    assert len(again.attempts) == 1


async def test_complete_up_for_retry_schedules_next_attempt(store: SqlStore) -> None:
    (tr,) = await _running(store)
    retry = outcome(tr, S.UP_FOR_RETRY, at(110), retry_at=at(130), error="boom", exit_code=2)

    assert (await store.complete([retry])).applied == [tr.id]

    detail = await store.get_run(tr.run_id)
    assert detail is not None
    (stored,) = detail.task_runs
    assert (stored.state, stored.attempt, stored.due_at) == (S.UP_FOR_RETRY, 2, at(130))
    assert (stored.error, stored.worker_id, stored.started_at) == ("boom", None, None)
    assert detail.run.state == RunState.RUNNING
    assert [(a.attempt, a.state, a.error) for a in detail.attempts] == [(1, S.UP_FOR_RETRY, "boom")]
    assert await store.due_task_runs(at(129), 10) == []
    assert [d.attempt for d in await store.due_task_runs(at(130), 10)] == [2]
    # The old attempt's key is now stale everywhere.
    assert await store.mark_queued([key(tr)], at(131)) == []
    assert len(await store.mark_queued([(tr.id, 2)], at(131))) == 1


async def test_complete_failed_dead_letters_and_fails_run(store: SqlStore) -> None:
    (tr,) = await _running(store)
    assert (await store.complete([outcome(tr, S.FAILED, at(110), error="no")])).applied == [tr.id]
    detail = await store.get_run(tr.run_id)
    assert detail is not None
    assert detail.task_runs[0].state == S.FAILED
    assert detail.run.state == RunState.FAILED
    assert [r.id for r in (await store.list_runs(state="dead")).runs] == [tr.run_id]


async def test_complete_keeps_any_text_of_errors_and_results_exactly(store: SqlStore) -> None:
    awkward = 'said "no", \\ {x} NULL\n\tü'
    failed, done = await _running(store, 2)
    result = '{"quote": "\\"", "list": [1, null], "text": "a,b}"}'

    await store.complete(
        [
            outcome(failed, S.FAILED, at(110), error=awkward),
            dataclasses.replace(outcome(done, S.SUCCESS, at(110), error="NULL"), result=result),
        ]
    )

    f, d = await store.get_task_run(failed.id), await store.get_task_run(done.id)
    assert f is not None and d is not None
    assert (f.error, d.error, d.result) == (awkward, "NULL", result)
    detail = await store.get_run(failed.run_id)
    assert detail is not None
    assert [a.error for a in detail.attempts] == [awkward]


async def test_complete_applies_a_batch_and_skips_stale_outcomes(store: SqlStore) -> None:
    a, b, c = await _running(store, 3)
    applied = await store.complete(
        [
            outcome(a, S.SUCCESS, at(110)),
            outcome(b, S.CANCELLED, at(110)),
            dataclasses.replace(outcome(c, S.SUCCESS, at(110)), attempt=c.attempt + 1),
        ]
    )
    assert sorted(applied.applied) == sorted([a.id, b.id])
    assert applied.runs_finished == {"success": 1, "cancelled": 1}  # runs of one task run
    assert await _run_state(store, a) == RunState.SUCCESS
    assert await _run_state(store, b) == RunState.CANCELLED
    assert await _run_state(store, c) == RunState.RUNNING


async def test_complete_refuses_an_outcome_state_not_reachable_from_running(
    store: SqlStore,
) -> None:
    (tr,) = await _running(store)
    with pytest.raises(ValueError, match="queued"):
        await store.complete([outcome(tr, S.QUEUED, at(110))])


async def test_requeue_returns_queued_rows_to_scheduled_due_now(store: SqlStore) -> None:
    a, b = await _queued(store, 2)
    await store.claim([key(b)], "w1", at(1))

    assert await store.requeue([key(a), key(b), (a.id, 9)], at(5)) == 1

    assert [(tr.id, tr.due_at) for tr in await store.due_task_runs(at(5), 10)] == [(a.id, at(5))]
    assert await _run_state(store, a) == RunState.SCHEDULED


async def test_multi_task_run_state_follows_its_task_runs(store: SqlStore) -> None:
    job = make_job("dag", tasks=[shell_task("a"), shell_task("b", upstream=["a"])])
    new_run = make_run(job, T0)
    await store.create_jobs([(job, [new_run])])
    first, _second = new_run.task_runs
    await store.mark_queued([key(first)], at(1))
    assert await _run_state(store, first) == RunState.QUEUED
    await store.claim([key(first)], "w1", at(2))
    await store.complete([outcome(first, S.SUCCESS, at(3))])
    # One task done, one still waiting: the run is under way.
    assert await _run_state(store, first) == RunState.RUNNING


async def test_the_reconciler_s_and_reaper_s_reads_return_task_runs_as_stored(
    store: SqlStore,
) -> None:
    # On PostgreSQL these are read planned once, through the driver (not SQLAlchemy's
    # result processing): every field, JSON and timestamps included, must come back the same.
    (tr,) = await _queued(store)
    (queued,) = await store.queued_task_runs(at(1000), 10)
    assert queued == await store.get_task_run(tr.id)
    await store.claim([key(tr)], "w1", at(100))
    (stale,) = await store.stale_running(at(1000), 10)
    assert stale == await store.get_task_run(tr.id)
    assert stale.started_at == at(100) and stale.config == tr.config
