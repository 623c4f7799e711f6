"""``ObservedStore``: each metric read off the store's traffic moves when that traffic
happens (a real SQLite store underneath)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import make_job, shell_task
from tests.observe.metric_values import value
from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import Outcome, RunTrigger, Schedule, ScheduleKind, TaskRunState
from tickwork.core.runs import new_run, skipped_run
from tickwork.ids import new_id
from tickwork.observe.store import observed_store
from tickwork.ports import Fence, Fenced, Materialization, Store
from tickwork.store import open_store


def now() -> datetime:
    return datetime.now(UTC)


async def queued(
    store: Store, queue: str = "obs", *, due: datetime, state: TaskRunState = TaskRunState.QUEUED
) -> str:
    job = replace(make_job(f"j{new_id()[-10:]}", now=due, task=shell_task("true")), queue=queue)
    nr = new_run(job, due, trigger=RunTrigger.MANUAL, now=due, make_id=new_id, state=state)
    await store.create_jobs([(job, [nr])])
    return nr.task_runs[0].id


async def test_claim_and_complete_count_outcomes_durations_and_start_delay(
    sqlite_store: Store,
) -> None:
    store = observed_store(sqlite_store)
    t = now()
    ok, bad, again = [await queued(store, due=t - timedelta(seconds=2)) for _ in range(3)]
    before = {
        o: value("tickwork_task_runs_total", queue="obs", outcome=o)
        for o in ("success", "failed", "retry")
    }
    delays = value("tickwork_task_start_delay_seconds_count", queue="obs")
    delay_sum = value("tickwork_task_start_delay_seconds_sum", queue="obs")

    claimed = await store.claim([(ok, 1), (bad, 1), (again, 1)], "w", t)
    assert len(claimed) == 3
    assert value("tickwork_task_start_delay_seconds_count", queue="obs") == delays + 3
    assert value("tickwork_task_start_delay_seconds_sum", queue="obs") - delay_sum >= 6.0 - 1e-6

    done = t + timedelta(seconds=3)
    await store.complete(
        [
            Outcome(ok, 1, TaskRunState.SUCCESS, finished_at=done, started_at=t),
            Outcome(bad, 1, TaskRunState.FAILED, finished_at=done, started_at=t, error="x"),
            Outcome(
                again, 1, TaskRunState.UP_FOR_RETRY, finished_at=done, started_at=t, retry_at=done
            ),
        ]
    )
    for outcome in ("success", "failed", "retry"):
        got = value("tickwork_task_runs_total", queue="obs", outcome=outcome)
        assert got == before[outcome] + 1, outcome
    assert (
        value("tickwork_task_duration_seconds_bucket", queue="obs", outcome="success", le="5.0")
        >= 1
    )


async def test_runs_are_counted_once_when_their_last_outcome_finishes_them(
    sqlite_store: Store,
) -> None:
    store = observed_store(sqlite_store)
    t = now()
    alone = await queued(store, due=t)  # a run of one task run
    two = replace(
        make_job(f"j{new_id()[-10:]}", now=t, task=shell_task("true")),
        tasks=(shell_task("true"), replace(shell_task("true"), name="second")),
    )
    nr = new_run(
        two, t, trigger=RunTrigger.MANUAL, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )
    await store.create_jobs([(two, [nr])])
    first, second = (tr.id for tr in nr.task_runs)
    before = {o: value("tickwork_runs_total", outcome=o) for o in ("success", "failed")}

    claimed = await store.claim([(alone, 1), (first, 1), (second, 1)], "w", t)
    assert len(claimed) == 3
    end = t + timedelta(seconds=1)
    await store.complete([Outcome(alone, 1, TaskRunState.FAILED, finished_at=end, started_at=t)])
    await store.complete([Outcome(first, 1, TaskRunState.SUCCESS, finished_at=end, started_at=t)])
    # One of two task runs done: the run is still running, so nothing is counted yet.
    assert value("tickwork_runs_total", outcome="failed") == before["failed"] + 1
    assert value("tickwork_runs_total", outcome="success") == before["success"]
    await store.complete([Outcome(second, 1, TaskRunState.SUCCESS, finished_at=end, started_at=t)])
    assert value("tickwork_runs_total", outcome="success") == before["success"] + 1
    assert value("tickwork_runs_total", outcome="failed") == before["failed"] + 1


async def test_an_outcome_the_store_refuses_counts_nothing(sqlite_store: Store) -> None:
    store = observed_store(sqlite_store)
    t = now()
    tid = await queued(store, "refused", due=t)
    await store.claim([(tid, 1)], "w", t)
    late = Outcome(tid, 7, TaskRunState.SUCCESS, finished_at=t, started_at=t)  # wrong attempt
    await store.complete([late])
    assert value("tickwork_task_runs_total", queue="refused", outcome="success") == 0


async def test_queueing_due_work_records_its_lateness(sqlite_store: Store) -> None:
    store = observed_store(sqlite_store)
    t = now()
    tid = await queued(store, "late", due=t - timedelta(seconds=40), state=TaskRunState.SCHEDULED)
    count = value("tickwork_schedule_delay_seconds_count", queue="late")
    await store.mark_queued([(tid, 1)], t)
    assert value("tickwork_schedule_delay_seconds_count", queue="late") == count + 1
    assert value("tickwork_schedule_delay_seconds_bucket", queue="late", le="30.0") == 0
    assert value("tickwork_schedule_delay_seconds_bucket", queue="late", le="60.0") == 1


async def test_reaper_and_reconciler_finds_are_counted(sqlite_store: Store) -> None:
    store = observed_store(sqlite_store)
    t = now()
    tid = await queued(store, due=t - timedelta(minutes=5))
    resent = value("tickwork_reconciler_resent_total")
    assert len(await store.queued_task_runs(t, 100)) == 1
    assert value("tickwork_reconciler_resent_total") == resent + 1
    await store.claim([(tid, 1)], "w", t - timedelta(minutes=1))
    reaped = value("tickwork_reaper_recovered_total")
    assert len(await store.stale_running(t, 100)) == 1
    assert value("tickwork_reaper_recovered_total") == reaped + 1


async def test_missed_cron_fires_are_counted_as_missed_ticks_and_skipped_runs(
    sqlite_store: Store,
) -> None:
    store = observed_store(sqlite_store)
    t = now()
    cron = Schedule(kind=ScheduleKind.CRON, cron="* * * * *", timezone="UTC")
    job = make_job("every-minute", now=t, schedule=cron, next_fire_at=t, task=shell_task("true"))
    await store.create_jobs([(job, [])])
    missed = [skipped_run(job, t - timedelta(minutes=m), now=t, make_id=new_id) for m in (1, 2)]
    before = value("tickwork_missed_ticks_total")
    skipped = value("tickwork_runs_total", outcome="skipped")
    await store.materialize_many([Materialization(job.id, t, t + timedelta(minutes=1), missed)])
    assert value("tickwork_missed_ticks_total") == before + 2
    assert value("tickwork_runs_total", outcome="skipped") == skipped + 2  # finished as skipped


async def test_a_new_epoch_is_an_election_and_a_stale_fence_a_refused_write(
    sqlite_store: Store,
) -> None:
    a, b = observed_store(sqlite_store), observed_store(sqlite_store)
    elections = value("tickwork_leader_elections_total")
    first = await a.acquire_lease("obs-lease", "a", 0.5)
    assert first is not None
    assert await a.acquire_lease("obs-lease", "a", 0.5) is not None  # renewed: same epoch
    assert value("tickwork_leader_elections_total") == elections + 1
    # a's lease runs out; b takes it with a higher epoch
    taken = None
    deadline = now() + timedelta(seconds=5)
    while taken is None and now() < deadline:
        taken = await b.acquire_lease("obs-lease", "b", 30)
    assert taken is not None and taken.token > first.token
    assert value("tickwork_leader_elections_total") == elections + 2

    fenced = value("tickwork_fenced_writes_rejected_total")
    tid = await queued(sqlite_store, due=now(), state=TaskRunState.SCHEDULED)
    with pytest.raises(Fenced):
        await a.mark_queued([(tid, 1)], now(), fence=Fence("obs-lease", first.token))
    assert value("tickwork_fenced_writes_rejected_total") == fenced + 1


async def test_every_operation_is_timed_and_outages_counted(
    sqlite_store: Store, tmp_path: Path
) -> None:
    store = observed_store(sqlite_store)
    calls = value("tickwork_store_operation_seconds_count", op="list_workers")
    await store.list_workers()
    assert value("tickwork_store_operation_seconds_count", op="list_workers") == calls + 1

    gone = observed_store(await open_store(f"sqlite:///{tmp_path}/no/such/dir/x.db"))
    errors = value("tickwork_store_unavailable_total", op="list_workers")
    try:
        with pytest.raises(StoreUnavailable):
            await gone.list_workers()
    finally:
        await gone.close()
    assert value("tickwork_store_operation_seconds_count", op="list_workers") == calls + 2
    assert value("tickwork_store_unavailable_total", op="list_workers") == errors + 1


async def test_a_cancel_that_ends_a_run_at_rest_counts_it_once(sqlite_store: Store) -> None:
    store = observed_store(sqlite_store)
    t = now()
    tid = await queued(store, due=t)
    task_run = await store.get_task_run(tid)
    assert task_run is not None
    before = value("tickwork_runs_total", outcome="cancelled")

    assert await store.cancel_run(task_run.run_id, t) == []
    assert value("tickwork_runs_total", outcome="cancelled") == before + 1
    await store.cancel_run(task_run.run_id, t)  # already finished: nothing more
    await store.cancel_task_run(tid, t)
    assert value("tickwork_runs_total", outcome="cancelled") == before + 1


async def test_a_cancel_of_a_running_task_run_leaves_the_count_to_its_worker(
    sqlite_store: Store,
) -> None:
    store = observed_store(sqlite_store)
    t = now()
    tid = await queued(store, due=t)
    await store.claim([(tid, 1)], "w", t)
    before = value("tickwork_runs_total", outcome="cancelled")

    asked = await store.cancel_task_run(tid, t)
    assert [tr.id for tr in asked] == [tid]  # only asked to stop: the run is still running
    assert value("tickwork_runs_total", outcome="cancelled") == before
    await store.complete([Outcome(tid, 1, TaskRunState.CANCELLED, finished_at=t, started_at=t)])
    assert value("tickwork_runs_total", outcome="cancelled") == before + 1
