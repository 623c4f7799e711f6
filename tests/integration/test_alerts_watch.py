"""Run alerts end to end in one process, on SQLite and PostgreSQL: the leader's check finds
runs past their start deadline or SLA, records each alert once (fenced) and fires the job's
``on_missed`` / ``on_sla_miss`` hook with the documented payload, exactly once even when a
new leader takes over and looks at the same window again."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest

from tests.contract.factory import T0, make_job, make_run
from tests.fixtures import callbacks
from tests.helpers import eventually
from tests.observe.metric_values import value
from tickwork.broker.memory import MemoryBroker
from tickwork.core.alerts import AlertKind
from tickwork.core.model import (
    Callback,
    CallbackEvent,
    Job,
    Outcome,
    RunTrigger,
    TaskKind,
    TaskRunState,
)
from tickwork.hooks import Hooks
from tickwork.ids import new_id
from tickwork.observe.store import observed_store
from tickwork.ports import Fence, Fenced, Lease
from tickwork.scheduler.alerts import AlertWatcher
from tickwork.scheduler.loop import Scheduler
from tickwork.store import SqlStore

MIN = timedelta(minutes=1)
RECORD = Callback(TaskKind.PYTHON, {"target": "tests.fixtures.callbacks:record_alert"})
HOOKS = {CallbackEvent.ON_MISSED: RECORD, CallbackEvent.ON_SLA_MISS: RECORD}


def alerts_of(job: str) -> list[tuple[str, str]]:
    return [(a.event.value, a.run_id) for a in callbacks.ALERTS if a.job_name == job]


@pytest.fixture(autouse=True)
def _no_alerts_yet() -> None:
    callbacks.ALERTS.clear()


async def add_job(
    store: SqlStore, name: str, *, start_deadline: float | None = None, sla: float | None = None
) -> Job:
    job = dataclasses.replace(
        make_job(name), callbacks=HOOKS, start_deadline=start_deadline, sla=sla
    )
    await store.create_jobs([(job, [])])
    return job


async def add_run(
    store: SqlStore,
    job: Job,
    at: datetime,
    state: TaskRunState = TaskRunState.QUEUED,
    trigger: RunTrigger = RunTrigger.SCHEDULE,
) -> str:
    made = make_run(job, at, state=state, trigger=trigger)
    await store.create_runs([made])
    return made.run.id


async def watch(store: SqlStore, now: datetime, fence: Fence | None = None) -> AlertWatcher:
    hooks = Hooks()
    watcher = AlertWatcher(store, fence=lambda: fence, hooks=hooks, lookback=timedelta(hours=1))
    await watcher.check(now)
    await hooks.close(5.0)
    await watcher.mark_done(now)  # what its next look does first
    return watcher


async def test_a_run_not_started_past_its_deadline_fires_on_missed_once_with_its_payload(
    store: SqlStore,
) -> None:
    job = await add_job(store, "late-start", start_deadline=120.0)
    late = await add_run(store, job, T0)
    await add_run(store, job, T0 + 10 * MIN, TaskRunState.QUEUED)  # deadline not passed yet

    await watch(store, T0 + 2 * MIN)  # on the deadline: still in time
    assert alerts_of("late-start") == []
    await watch(store, T0 + 3 * MIN)
    await watch(store, T0 + 4 * MIN)  # a second look: on record, not fired again
    assert alerts_of("late-start") == [("on_missed", late)]
    [context] = [a for a in callbacks.ALERTS if a.run_id == late]
    assert context.to_json() == {
        "event": "on_missed",
        "job_name": "late-start",
        "run_id": late,
        "logical_date": T0.isoformat(),
        "state": "queued",
        "limit_seconds": 120.0,
        "late_seconds": 60.0,
        "started_at": None,
        "finished_at": None,
        "fired_at": (T0 + 3 * MIN).isoformat(),
    }
    summary = await store.recent_alerts(T0, job_name="late-start")
    [fired] = summary.newest
    assert (summary.missed, summary.sla_misses) == (1, 0)
    assert (fired.run_id, fired.kind, fired.late_seconds) == (late, AlertKind.MISSED, 60.0)


async def test_the_default_deadline_applies_and_backfills_paused_jobs_stay_quiet(
    store: SqlStore,
) -> None:
    job = await add_job(store, "default-deadline")
    scheduled = await add_run(store, job, T0)
    await add_run(store, job, T0 - MIN, trigger=RunTrigger.BACKFILL)
    paused = await add_job(store, "paused-job", start_deadline=60.0)
    await add_run(store, paused, T0)
    await store.set_paused(paused.id, True, T0)

    await watch(store, T0 + 5 * MIN)
    assert alerts_of("default-deadline") == []
    await watch(store, T0 + 6 * MIN)
    assert alerts_of("default-deadline") == [("on_missed", scheduled)]
    assert alerts_of("paused-job") == []


async def test_a_run_over_its_sla_fires_on_sla_miss_once_one_in_time_never(
    store: SqlStore,
) -> None:
    job = await add_job(store, "sla-job", sla=600.0)
    slow = await add_run(store, job, T0, TaskRunState.RUNNING)
    fast = await add_run(store, job, T0 + MIN, TaskRunState.RUNNING)
    detail = await store.get_run(fast)
    assert detail is not None
    [tr] = detail.task_runs
    await store.complete([_success(tr.id, T0 + 2 * MIN)])

    for minute in (9, 12, 15):
        await watch(store, T0 + minute * MIN)
    assert sorted(alerts_of("sla-job")) == [("on_sla_miss", slow)]
    summary = await store.recent_alerts(T0, job_name="sla-job")
    assert (summary.missed, summary.sla_misses) == (0, 1)


async def _lease_fences(store: SqlStore) -> tuple[Fence, Callable[[], Awaitable[Fence]]]:
    old = await store.acquire_lease("scheduler", "old-leader", 1.0)
    assert old is not None

    async def take_over() -> Fence:
        new: Lease | None = await eventually(
            lambda: store.acquire_lease("scheduler", "new-leader", 30.0),
            lambda lease: lease is not None,
        )
        assert new is not None
        return new.fence

    return old.fence, take_over


async def _external_fences(store: SqlStore) -> tuple[Fence, Callable[[], Awaitable[Fence]]]:
    """Tokens of a lease held in etcd or ZooKeeper: the store learns of a new leader when it
    checks in, as ``LeaderElection`` does on taking over."""
    old = Fence("scheduler", 41, external=True)
    await store.check_fence(old)

    async def take_over() -> Fence:
        new = Fence("scheduler", 57, external=True)
        await store.check_fence(new)
        return new

    return old, take_over


@pytest.mark.parametrize("lease", ["database", "external"])
async def test_a_new_leader_fires_no_alert_twice_and_the_old_one_is_fenced(
    store: SqlStore, lease: str
) -> None:
    job = await add_job(store, "failover", start_deadline=60.0)
    first = await add_run(store, job, T0)
    old, take_over = await (_lease_fences if lease == "database" else _external_fences)(store)
    old_watcher = await watch(store, T0 + 2 * MIN, old)
    assert alerts_of("failover") == [("on_missed", first)]

    second = await add_run(store, job, T0 + 2 * MIN)
    new = await take_over()
    with pytest.raises(Fenced):  # the old leader, still looking, may record nothing
        await old_watcher.check(T0 + 4 * MIN)
    assert alerts_of("failover") == [("on_missed", first)]
    # The new leader looks an hour back: the first alert is on record, only the second fires.
    await watch(store, T0 + 4 * MIN, new)
    assert alerts_of("failover") == [("on_missed", first), ("on_missed", second)]
    assert (await store.recent_alerts(T0, job_name="failover")).missed == 2


def _success(task_run_id: str, at: datetime) -> Outcome:
    return Outcome(task_run_id, 1, TaskRunState.SUCCESS, at, started_at=at - MIN)


async def test_the_scheduler_pass_checks_alerts_in_its_housekeeping(store: SqlStore) -> None:
    job = await add_job(store, "via-loop", start_deadline=60.0)
    late = await add_run(store, job, T0)
    hooks = Hooks()
    scheduler = Scheduler(
        store, MemoryBroker(), clock=lambda: T0 + 2 * MIN, rand=lambda: 0.5, make_id=new_id,
        hooks=hooks,
    )  # fmt: skip
    await scheduler.tick(T0 + 2 * MIN)
    await hooks.close(5.0)
    assert alerts_of("via-loop") == [("on_missed", late)]


async def test_each_new_alert_counts_once_by_kind_in_the_metrics(store: SqlStore) -> None:
    job = await add_job(store, "counted", start_deadline=60.0, sla=600.0)
    await add_run(store, job, T0)
    observed = observed_store(store)
    kinds = ("on_missed", "on_sla_miss")
    before = {k: value("tickwork_run_alerts_total", kind=k) for k in kinds}

    def counted() -> tuple[float, ...]:
        return tuple(value("tickwork_run_alerts_total", kind=k) - before[k] for k in kinds)

    await watch(observed, T0 + 2 * MIN)
    assert counted() == (1, 0)
    await AlertWatcher(observed, fence=lambda: None).check(T0 + 3 * MIN)  # a new leader, again
    assert counted() == (1, 0)
    await watch(observed, T0 + 11 * MIN)
    assert counted() == (1, 1)


@pytest.mark.parametrize("lease", ["database", "external"])
async def test_an_alert_a_leader_recorded_and_died_before_firing_the_next_one_fires_once(
    store: SqlStore, lease: str
) -> None:
    job = await add_job(store, "died", start_deadline=60.0)
    late = await add_run(store, job, T0)
    old, take_over = await (_lease_fences if lease == "database" else _external_fences)(store)
    dying = Hooks()
    await dying.close(0.0)  # the process stops between the record and the callback
    await AlertWatcher(store, fence=lambda: old, hooks=dying).check(T0 + 2 * MIN)
    assert alerts_of("died") == []
    [unfired] = await store.unfired_alerts(T0 + 3 * MIN, 10)
    assert (unfired.run_id, unfired.kind, unfired.fired_at) == (
        late,
        AlertKind.MISSED,
        T0 + 2 * MIN,
    )

    new = await take_over()
    hooks = Hooks()
    leader = AlertWatcher(store, fence=lambda: new, hooks=hooks, refire_after=MIN)
    await leader.check(T0 + 2 * MIN + timedelta(seconds=30))  # within the grace: not yet
    assert alerts_of("died") == []
    await leader.check(T0 + 4 * MIN)  # its window looked at again: on record, fired again
    await hooks.close(5.0)
    assert alerts_of("died") == [("on_missed", late)]
    [context] = callbacks.ALERTS
    assert (context.fired_at, context.late_seconds) == (T0 + 2 * MIN, 60.0)  # as recorded
    await leader.check(T0 + 5 * MIN)  # marks it done
    assert await store.unfired_alerts(T0 + 6 * MIN, 10) == []
    await watch(store, T0 + 30 * MIN, new)  # and no later look fires it again
    assert alerts_of("died") == [("on_missed", late)]


async def test_a_fired_alert_is_not_fired_again_by_its_leader_or_the_next(store: SqlStore) -> None:
    job = await add_job(store, "fired-once", sla=60.0)
    late = await add_run(store, job, T0, TaskRunState.RUNNING)
    old, take_over = await _external_fences(store)
    hooks = Hooks()
    leader = AlertWatcher(store, fence=lambda: old, hooks=hooks, refire_after=MIN)
    await leader.check(T0 + 2 * MIN)
    await hooks.close(5.0)  # the callback ran: marked by this look or the next
    assert alerts_of("fired-once") == [("on_sla_miss", late)]
    await leader.check(T0 + 10 * MIN)  # past the grace: marked, not fired again
    assert await store.unfired_alerts(T0 + 10 * MIN, 10) == []
    await watch(store, T0 + 20 * MIN, await take_over())
    assert alerts_of("fired-once") == [("on_sla_miss", late)]


async def test_alert_marks_are_fenced(store: SqlStore) -> None:
    job = await add_job(store, "fenced-mark", start_deadline=60.0)
    late = await add_run(store, job, T0)
    old, take_over = await _external_fences(store)
    dying = Hooks()
    await dying.close(0.0)
    await AlertWatcher(store, fence=lambda: old, hooks=dying).check(T0 + 2 * MIN)
    await take_over()
    with pytest.raises(Fenced):  # a deposed leader marks nothing: the new one decides
        await store.mark_hooks_done([(late, AlertKind.MISSED)], T0 + 3 * MIN, fence=old)
    assert len(await store.unfired_alerts(T0 + 3 * MIN, 10)) == 1
