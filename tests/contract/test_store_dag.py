"""Store contract for DAG execution: readiness on completion, pools, gates, dispatch order."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from tests.contract.factory import T0, at, key, outcome
from tickwork.core.model import (
    Job,
    NewRun,
    Pool,
    RunTrigger,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRun,
    TaskRunState,
    TriggerRule,
)
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.store import SqlStore

S = TaskRunState


def task(
    name: str,
    *upstream: str,
    rule: TriggerRule = TriggerRule.ALL_SUCCESS,
    pool: str | None = None,
    pool_slots: int = 1,
) -> Task:
    return Task(
        name=name,
        kind=TaskKind.SHELL,
        config={"argv": ["true"]},
        upstream=upstream,
        trigger_rule=rule,
        pool=pool,
        pool_slots=pool_slots,
    )


def job(
    name: str,
    *tasks: Task,
    priority: int = 0,
    max_active_runs: int | None = None,
    depends_on_past: bool = False,
) -> Job:
    return Job(
        id=new_id(),
        name=name,
        schedule=Schedule(kind=ScheduleKind.NOW),
        tasks=tasks or (task("main"),),
        created_at=T0,
        updated_at=T0,
        priority=priority,
        max_active_runs=max_active_runs,
        depends_on_past=depends_on_past,
    )


def run(j: Job, logical: datetime = T0, state: TaskRunState = S.SCHEDULED) -> NewRun:
    return new_run(j, logical, trigger=RunTrigger.MANUAL, now=T0, make_id=new_id, state=state)


def by_name(nr: NewRun) -> dict[str, TaskRun]:
    return {tr.task_name: tr for tr in nr.task_runs}


async def test_finishing_a_task_queues_its_ready_downstreams_in_the_same_write(
    store: SqlStore,
) -> None:
    j = job("chain", task("a"), task("b", "a"), task("c", "b"))
    nr = run(j, state=S.QUEUED)
    await store.create_jobs([(j, [nr])])
    a = by_name(nr)["a"]
    assert [tr.task_name for tr in nr.task_runs if tr.state is S.QUEUED] == ["a"]
    await store.claim([key(a)], "w1", at(1))

    done = await store.complete([dataclasses.replace(outcome(a, S.SUCCESS, at(2)), result="7")])

    assert done.applied == [a.id]
    assert done.runs_finished == {}
    assert [(tr.task_name, tr.state) for tr in done.queued] == [("b", S.QUEUED)]
    assert done.waiting == 0
    claimed = await store.claim([key(done.queued[0])], "w1", at(3))
    assert claimed[0].inputs == {"a": 7}


async def test_a_final_failure_propagates_upstream_failed_transitively(store: SqlStore) -> None:
    j = job(
        "fail", task("a"), task("b", "a"), task("c", "b"), task("d", "c", rule=TriggerRule.ALL_DONE)
    )
    nr = run(j, state=S.QUEUED)
    await store.create_jobs([(j, [nr])])
    a = by_name(nr)["a"]
    await store.claim([key(a)], "w1", at(1))

    done = await store.complete([outcome(a, S.FAILED, at(2), error="boom")])

    assert [tr.task_name for tr in done.queued] == ["d"]
    assert done.runs_finished == {}  # d still runs
    detail = await store.get_run(nr.run.id)
    assert detail is not None
    assert {tr.task_name: tr.state for tr in detail.task_runs} == {
        "a": S.FAILED,
        "b": S.UPSTREAM_FAILED,
        "c": S.UPSTREAM_FAILED,
        "d": S.QUEUED,
    }
    assert all(tr.finished_at == at(2) for tr in detail.task_runs if tr.task_name in "bc")
    await store.claim([key(done.queued[0])], "w1", at(3))
    last = await store.complete([outcome(done.queued[0], S.SUCCESS, at(4))])
    assert last.runs_finished == {"failed": 1}  # the run ends with its last task run


async def test_a_retry_is_not_a_final_failure(store: SqlStore) -> None:
    j = job("retry", task("a"), task("b", "a"))
    nr = run(j, state=S.QUEUED)
    await store.create_jobs([(j, [nr])])
    a = by_name(nr)["a"]
    await store.claim([key(a)], "w1", at(1))

    done = await store.complete([outcome(a, S.UP_FOR_RETRY, at(2), retry_at=at(5))])

    assert done.queued == [] and done.waiting == 0
    detail = await store.get_run(nr.run.id)
    assert detail is not None
    assert {tr.task_name: tr.state for tr in detail.task_runs} == {
        "a": S.UP_FOR_RETRY,
        "b": S.PENDING,
    }


async def test_due_task_runs_order_priority_then_older_logical_date(store: SqlStore) -> None:
    low, high = job("low", priority=0), job("high", priority=5)
    runs = {
        "low-new": run(low, at(-10)),
        "low-old": run(low, at(-100)),
        "high-new": run(high, at(-5)),
        "high-old": run(high, at(-50)),
    }
    await store.create_jobs(
        [(low, [runs["low-new"], runs["low-old"]]), (high, [runs["high-new"], runs["high-old"]])]
    )
    ids = {nr.task_runs[0].id: name for name, nr in runs.items()}

    due = await store.due_task_runs(at(0), 10)

    assert [ids[tr.id] for tr in due] == ["high-old", "high-new", "low-old", "low-new"]


async def test_a_pool_admits_only_what_fits_in_dispatch_order(store: SqlStore) -> None:
    await store.set_pool(Pool(name="db", slots=3), T0)
    wide, narrow = task("main", pool="db", pool_slots=2), task("main", pool="db")
    big, small = job("big", wide, priority=1), job("small", narrow)
    first, second = run(big, at(-10)), run(big, at(-5))
    little = run(small, at(-20))
    await store.create_jobs([(big, [first, second]), (small, [little])])

    due = await store.due_task_runs(at(0), 10)
    queued = await store.mark_queued([key(tr) for tr in due], at(0))

    # Priority first: `big` at -10 takes 2 slots; the second `big` (2) would not fit; the
    # 1-slot `small` does.
    assert {tr.id for tr in queued} == {first.task_runs[0].id, little.task_runs[0].id}
    usage = await store.get_pool("db")
    assert usage is not None and usage.used == 3
    assert await store.due_task_runs(at(0), 10) == []  # full: nothing more is offered
    assert await store.next_due_at() is None  # ... and the scheduler does not spin on it


async def test_slots_come_back_when_the_reaper_fails_a_lost_task(store: SqlStore) -> None:
    await store.set_pool(Pool(name="db", slots=1), T0)
    j = job("lost", task("main", pool="db"))
    waiting = run(j, at(-1))
    held = run(j, at(-2))
    await store.create_jobs([(j, [held, waiting])])
    (first,) = await store.mark_queued(
        [key(tr) for tr in await store.due_task_runs(at(0), 10)], at(0)
    )
    assert first.id == held.task_runs[0].id
    await store.claim([key(first)], "dead-worker", at(1))

    zombies = await store.stale_running(at(1) + timedelta(seconds=20), 10)
    done = await store.complete([outcome(zombies[0], S.FAILED, at(30), error="worker lost")])

    assert done.pools_freed
    usage = await store.get_pool("db")
    assert usage is not None and usage.used == 0
    nxt = await store.due_task_runs(at(30), 10)
    assert [tr.id for tr in nxt] == [waiting.task_runs[0].id]


async def test_max_active_runs_offers_only_the_oldest_unfinished_runs(store: SqlStore) -> None:
    j = job("limited", max_active_runs=2)
    runs = [run(j, at(-i)) for i in (1, 3, 2)]
    await store.create_jobs([(j, runs)])

    due = await store.due_task_runs(at(0), 10)

    assert [tr.logical_date for tr in due] == [at(-3), at(-2)]


async def test_depends_on_past_waits_for_the_previous_logical_date(store: SqlStore) -> None:
    j = job("past", depends_on_past=True)
    older, newer = run(j, at(-2)), run(j, at(-1))
    await store.create_jobs([(j, [older, newer])])

    assert [tr.logical_date for tr in await store.due_task_runs(at(0), 10)] == [at(-2)]
    (tr,) = await store.mark_queued([key(older.task_runs[0])], at(0))
    await store.claim([key(tr)], "w1", at(0))
    await store.complete([outcome(tr, S.SUCCESS, at(1))])

    assert [tr.logical_date for tr in await store.due_task_runs(at(1), 10)] == [at(-1)]
