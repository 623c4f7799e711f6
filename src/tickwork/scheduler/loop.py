"""The scheduler loop: materialize cron fires, dispatch due task runs, reap zombies, re-send.

It sleeps until the earliest thing it knows is due (the next cron fire or the next due task
run), capped at ``max_sleep``, and wakes early when told (a new `at` job, a retry, a resume).

With a ``window`` (distributed mode) it also keeps a sliding window of upcoming work with the
broker: task runs due within the window, but not before the next poll, are queued and handed
over ahead of time for delivery at their instants (``Broker.publish_at``). What is due sooner
is queued and published at its instant by this loop itself, as in embedded mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from tickwork.core.jitter import effective_jitter, spread_fires
from tickwork.core.model import Job, NewRun, Outcome, TaskRun, TaskRunState
from tickwork.core.retry import lost_outcome
from tickwork.core.runs import new_run, skipped_run
from tickwork.core.schedule import plan_ahead
from tickwork.hooks import Hooks
from tickwork.observe import tracing
from tickwork.ports import (
    Broker,
    CompletionStore,
    CronStore,
    Delivery,
    DispatchStore,
    Fence,
    Materialization,
    NextWork,
)
from tickwork.scheduler.alerts import AlertWatcher, AlertWatcherStore
from tickwork.scheduler.backfills import BackfillDriver, BackfillDriverStore
from tickwork.scheduler.resend import Resender

log = logging.getLogger("tickwork.scheduler")


#: Seconds of upcoming work a distributed scheduler hands to the broker ahead of time.
DEFAULT_WINDOW = 300.0


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    max_sleep: float = 1.0  # seconds; the longest the loop sleeps without looking (its poll)
    # Cron fires are materialized this long before they are due (as `scheduled` task runs),
    # so that at the fire itself only the queueing is left: many jobs firing at the same
    # instant cost one small batch update then, not their planning and inserts.
    lookahead: float = 1.0
    # Seconds of upcoming work handed to the broker ahead of time (see the module docstring);
    # cron fires are then materialized this far ahead too. 0: none (embedded mode);
    # ``ha_scheduler`` uses DEFAULT_WINDOW.
    window: float = 0.0
    batch: int = 500  # rows per store call
    heartbeat_timeout: float = 15.0  # a running task run silent this long is a zombie
    # A queued task run still unclaimed this long after it became claimable is re-published,
    # then again after twice as long, and so on up to ``resend_cap`` (see scheduler.resend).
    resend_after: float = 30.0
    resend_cap: float = 600.0
    housekeeping_every: float = 2.0  # how often zombies and lost messages are looked for
    # Seconds after the loop starts (after becoming leader) before the reaper may act, so
    # that workers cut off with us (a database restart, a failover) can heartbeat again
    # before their silence is taken for death. ``ha_scheduler`` uses heartbeat_timeout.
    reap_grace: float = 0.0
    # While a backfill is running, the loop looks again at least this often (seconds), so
    # its next runs start soon after the previous ones end (scheduler/backfills.py).
    backfill_poll: float = 0.2
    # Seconds over which the cron fires of one instant are spread, for jobs without a jitter
    # of their own (core/jitter.py: the same offset for the same fire on any scheduler).
    cron_spread: float = 0.0

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError(f"window must be 0 or more seconds, not {self.window!r}")

    @property
    def horizon(self) -> float:
        """How far ahead of their instants cron fires are materialized, in seconds."""
        return max(self.lookahead, self.window)


def delivery(tr: TaskRun) -> Delivery:
    return Delivery(tr.id, tr.attempt, tr.queue, tr.priority)


def deliveries(task_runs: Sequence[TaskRun]) -> list[Delivery]:
    return [delivery(tr) for tr in task_runs]


def timed_deliveries(task_runs: Sequence[TaskRun]) -> list[tuple[Delivery, datetime]]:
    """Deliveries with the instant each task run becomes claimable, for ``publish_at``."""
    return [(delivery(tr), tr.queued_at or tr.due_at) for tr in task_runs]


def _unfenced() -> None:
    return None


def _by(at: datetime | None, until: datetime) -> bool:
    return at is not None and at <= until


#: Something that calls its argument whenever new work may be due, until cancelled (the
#: PostgreSQL ``LISTEN`` of ``store/pg_listen.py``); it must not raise.
Listen = Callable[[Callable[[], None]], Awaitable[None]]


class SchedulerStore(
    CronStore, DispatchStore, CompletionStore, BackfillDriverStore, AlertWatcherStore, Protocol
):
    """What a scheduler needs of the store: cron fires, dispatch, the reaper's completions and
    the backfill driver's and the alert watcher's reads and writes (no token, web, secret or
    API reads)."""


class Scheduler:
    """Turns schedules into queued task runs. Stateless between ticks: the store is the record.

    With ``hooks``, the task runs the reaper fails fire their ``on_failure`` / ``on_retry``
    callbacks (with an empty log tail: the output left with the worker), and the alerts its
    housekeeping finds (``scheduler.alerts``) their job's ``on_missed`` / ``on_sla_miss``.
    ``fence`` gives the fence every store write carries: the leader's lease and token (it
    raises ``Fenced`` once this process knows it is no longer leader, which ends ``run``).
    Without it (embedded mode: one scheduler) writes carry none.
    ``listen`` runs beside the loop for as long as it runs (so only while leading), waking it
    when an enqueue is committed elsewhere (``tickwork.outbox``); the poll stays the safety net.
    """

    def __init__(
        self,
        store: SchedulerStore,
        broker: Broker,
        *,
        clock: Callable[[], datetime],
        rand: Callable[[], float],
        make_id: Callable[[], str],
        config: SchedulerConfig | None = None,
        hooks: Hooks | None = None,
        fence: Callable[[], Fence | None] = _unfenced,
        listen: Listen | None = None,
    ) -> None:
        self._store = store
        self._listen = listen
        self.passes = 0  # ticks done, for tests and probes
        self._broker = broker
        self._clock = clock
        self._rand = rand
        self._make_id = make_id
        self._config = config or SchedulerConfig()
        self._hooks = hooks
        self._fence = fence
        self._wakeup = asyncio.Event()
        self._reap_after = datetime.min.replace(tzinfo=UTC)
        self._resender = Resender(
            store,
            broker,
            clock,
            first=self._config.resend_after,
            cap=self._config.resend_cap,
            limit=self._config.batch * 10,
        )
        self._last_housekeeping: datetime | None = None
        self._backfills = BackfillDriver(store, make_id=make_id, fence=fence)
        self._backfilling = False
        self.alerts = AlertWatcher(store, fence=fence, hooks=hooks)

    def wake(self) -> None:
        """Look again now (called after anything that may have created due work)."""
        self._wakeup.set()

    async def run(self) -> None:
        listening = None
        if self._listen is not None:
            listening = asyncio.ensure_future(self._listen(self.wake))
        try:
            await self._run()
        finally:
            if listening is not None:
                listening.cancel()
                await asyncio.gather(listening, return_exceptions=True)

    async def _run(self) -> None:
        self._reap_after = self._clock() + timedelta(seconds=self._config.reap_grace)
        # Another process may have led before: hand over again all it may have queued.
        await self._resender.broker_forgot(self._clock())  # sets the marker a later loss is told by
        await self.resend_queued(self._clock() + timedelta(seconds=self._config.window))
        while True:
            self._wakeup.clear()
            now = self._clock()
            # One read says what is due; an idle pass reads nothing more (store/next_work.py).
            work = await self._store.next_work(now + timedelta(seconds=self._config.max_sleep))
            moved = await self.tick(now, work)
            self.passes += 1
            # A pass that found work changed what is due: look again at once.
            await self._sleep(0.0 if moved else self._next_wake(work))

    async def tick(self, now: datetime, work: NextWork | None = None) -> bool:
        """One pass: everything due at ``now`` is materialized and dispatched. With ``work``
        (``next_work`` read at ``now`` with ``after`` = ``now + max_sleep``) only what it says
        is due is looked at. True if anything was due."""
        if tracing.enabled():  # runs created in the pass link to its span
            with tracing.scheduler_pass():
                return await self._tick(now, work)
        return await self._tick(now, work)

    async def _tick(self, now: datetime, work: NextWork | None) -> bool:
        config, found = self._config, False
        if work is None or _by(work.fire_at, now + timedelta(seconds=config.horizon)):
            found |= await self._drain(self.materialize_due, now)
        self._backfilling = (work is None or work.backfilling) and await self._backfills.step(now)
        if work is None or _by(work.due_at, now):
            found |= await self._drain(self.dispatch_due, now)
        if config.window > 0 and (
            work is None or _by(work.ahead_at, now + timedelta(seconds=config.window))
        ):
            found |= await self._drain(self.hand_off_ahead, now)
        return await self._look_after(now) or found

    async def _drain(self, step: Callable[[datetime], Awaitable[int]], now: datetime) -> bool:
        """``step`` again while it takes a full batch; whether it found anything."""
        taken = await step(now)
        found = taken > 0
        while taken == self._config.batch:
            taken = await step(now)
        return found

    async def _look_after(self, now: datetime) -> bool:
        """A broker that lost its messages, and every ``housekeeping_every`` the reaper, the
        re-sending of lost messages and the alerts; whether the reaper moved anything (a
        retry it scheduled is due work the pass's first read did not see)."""
        if await self._resender.broker_forgot(now):
            log.warning("the broker lost its messages (flushed, restarted empty): re-sending")
            await self.resend_queued(now + timedelta(seconds=self._config.window))
        reaped = 0
        if self._housekeeping_due(now):
            if now >= self._reap_after:
                reaped = await self.reap_zombies(now)
            await self._resender.resend_stale(now)
            await self.alerts.check(now)
        return reaped > 0

    async def materialize_due(self, now: datetime) -> int:
        """Create the runs of every cron fire due by ``now``; returns how many jobs were due."""
        horizon = now + timedelta(seconds=self._config.horizon)
        jobs = await self._store.due_cron_jobs(horizon, self._config.batch)
        if jobs:
            plans = [self._plan(job, now, horizon) for job in jobs]
            queued = await self._store.materialize_many(plans, fence=self._fence())
            await self._broker.publish(deliveries(queued))
        return len(jobs)

    async def dispatch_due(self, now: datetime) -> int:
        """Queue and publish task runs whose due time has come; returns how many were due."""
        due = await self._store.due_task_runs(now, self._config.batch)
        if due:
            keys = [(tr.id, tr.attempt) for tr in due]
            queued = await self._store.mark_queued(keys, now, fence=self._fence())
            await self._broker.publish(deliveries(queued))
        return len(due)

    async def hand_off_ahead(self, now: datetime) -> int:
        """Queue task runs due within the window but after the next poll, and hand them to
        the broker for delivery at their instants; returns how many were due."""
        soon = now + timedelta(seconds=self._config.max_sleep)
        until = now + timedelta(seconds=self._config.window)
        due = await self._store.due_task_runs(until, self._config.batch, after=soon)
        if due:
            keys = [(tr.id, tr.attempt) for tr in due]
            queued = await self._store.queue_ahead(keys, now, fence=self._fence())
            await self._broker.publish_at(timed_deliveries(queued))
        return len(due)

    async def reap_zombies(self, now: datetime) -> int:
        """Fail running task runs whose worker stopped heartbeating; retry them by policy."""
        before = now - timedelta(seconds=self._config.heartbeat_timeout)
        stale = await self._store.stale_running(before, self._config.batch)
        return await self.fail_lost(stale, now, "worker lost: no heartbeat")

    async def fail_lost(self, task_runs: Sequence[TaskRun], now: datetime, why: str) -> int:
        unstarted = [(tr.id, tr.attempt) for tr in task_runs if tr.started_at is None]
        back: list[TaskRun] = []
        if unstarted:  # claimed ahead and never started: queued again, no attempt spent
            back = await self._store.requeue_unstarted(unstarted, now, fence=self._fence())
            await self._broker.publish(deliveries(back))
            if back:
                log.warning("re-queued %d unstarted task run(s): %s", len(back), why)
        # One that started meanwhile is left for the next pass (``start`` stamped it).
        started = [tr for tr in task_runs if tr.started_at is not None]
        return len(back) + await self._fail_started(started, now, why)

    async def _fail_started(self, task_runs: Sequence[TaskRun], now: datetime, why: str) -> int:
        # Lost with their worker: retried from the infrastructure budget too (core.retry).
        outcomes = [
            lost_outcome(
                tr,
                now=now,
                rand=self._rand(),
                error=f"{why} (worker {tr.worker_id})",
                started_at=tr.started_at,
                worker_id=tr.worker_id,
            )
            for tr in task_runs
        ]
        done = await self._store.complete(outcomes, fence=self._fence())
        await self._broker.publish(deliveries(done.queued))
        if done.waiting:
            self.wake()
        if done.applied:
            log.warning("failed %d lost task run(s): %s", len(done.applied), why)
            self._fire_hooks(task_runs, outcomes, set(done.applied))
        return len(done.applied)

    def _fire_hooks(
        self, task_runs: Sequence[TaskRun], outcomes: Sequence[Outcome], applied: set[str]
    ) -> None:
        if self._hooks is None:
            return
        for task_run, outcome in zip(task_runs, outcomes, strict=True):
            if task_run.callbacks and outcome.task_run_id in applied:
                self._hooks.fire(task_run, outcome, "")

    async def resend_queued(self, queued_before: datetime) -> int:
        """Re-publish every queued task run up to ``queued_before`` (a restart, a failover, a
        broker that lost its data); those handed out ahead and not claimable yet are handed
        out again for their instants (a broker delivers the same key once)."""
        return await self._resender.resend_all(queued_before)

    def _plan(self, job: Job, now: datetime, horizon: datetime) -> Materialization:
        assert job.next_fire_at is not None  # due_cron_jobs only returns jobs with one
        plan = plan_ahead(job, now, horizon, max_runs=self._config.batch)
        fires = [fire for fire, _ in plan.runs]
        jitter = effective_jitter(job.jitter, self._config.cron_spread)
        dues = spread_fires(job.name, fires, jitter, plan.new_next) if jitter else fires
        runs: list[NewRun] = [
            new_run(
                job,
                fire,
                trigger=trigger,
                now=now,
                make_id=self._make_id,
                # Due already: straight to the workers. Due soon: the dispatcher queues it.
                state=TaskRunState.QUEUED if due <= now else TaskRunState.SCHEDULED,
                due_at=due,
            )
            for (fire, trigger), due in zip(plan.runs, dues, strict=True)
        ]
        runs += [skipped_run(job, f, now=now, make_id=self._make_id) for f in plan.skipped]
        if plan.dropped:
            log.warning("job %s: %d missed fires not recorded (too many)", job.name, plan.dropped)
        return Materialization(job.id, job.next_fire_at, plan.new_next, runs)

    def _housekeeping_due(self, now: datetime) -> bool:
        last = self._last_housekeeping
        if last is None or (now - last).total_seconds() >= self._config.housekeeping_every:
            self._last_housekeeping = now
            return True
        return False

    def _next_wake(self, work: NextWork) -> float:
        """Seconds until the earliest thing ``work`` says will be due, capped by the poll."""
        config = self._config
        candidates = [work.due_at]
        if work.fire_at is not None:
            candidates.append(work.fire_at - timedelta(seconds=config.horizon))
        if work.ahead_at is not None and config.window > 0:
            candidates.append(work.ahead_at - timedelta(seconds=config.window))
        delay = config.backfill_poll if self._backfilling else config.max_sleep
        now = self._clock()
        for at in candidates:
            if at is not None:
                delay = min(delay, (at - now).total_seconds())
        return max(delay, 0.0)

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancel that
        # arrives just as the wake-up fires, and the loop would then never stop.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wakeup.wait()
