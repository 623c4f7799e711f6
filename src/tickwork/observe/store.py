"""``ObservedStore``: the ``Store`` port wrapped with metrics, so the scheduler and the worker
are measured without a line of metrics code inside them.

Every operation is timed (``tickwork_store_operation_seconds{op}``). A few operations also
say something about the work itself, read off their arguments and results:

- ``claim``: how long each task run waited from claimable to claimed (start delay);
- ``complete``: attempts finished, by queue and outcome, and how long they ran; the runs
  they finished, by the run's final state;
- ``mark_queued`` / ``materialize_many``: how late due work was queued (schedule lateness),
  and the missed cron fires recorded as skipped (runs finished as ``skipped`` too);
- ``cancel_run`` / ``cancel_task_run``: a run at rest that a cancel ends is a run finished
  (``cancelled``), read off the run's state before and after (two reads, on a rare call);
- ``record_alerts``: run alerts newly recorded (missed start deadline, SLA miss), by kind;
- ``stale_running``: task runs the reaper found without a live worker;
- ``queued_task_runs``: task runs the reconciler hands to the broker again;
- ``acquire_lease``: a new epoch means this process became leader;
- ``next_work``: the scheduler asks it at the start of every pass (its dead man's switch);
- ``Fenced`` from any write: a stale leader's write refused.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from tickwork.core.alerts import Alert
from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import (
    NewRun,
    Outcome,
    Run,
    RunState,
    RunTrigger,
    TaskRun,
    TaskRunState,
)
from tickwork.observe import metrics as m
from tickwork.observe import tracing
from tickwork.ports import Completion, EnqueueEntry, Fenced, Lease, Materialization, RunCopy

S = TypeVar("S")
log = logging.getLogger("tickwork.observe")

OUTCOMES = {
    TaskRunState.SUCCESS: "success",
    TaskRunState.UP_FOR_RETRY: "retry",
    TaskRunState.FAILED: "failed",
    TaskRunState.CANCELLED: "cancelled",
}
_FINISHED = frozenset({RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED})
#: Task runs whose queue is remembered between claim and completion; a bound, because a
#: claim whose completion another process writes (after a failover) is never popped.
MAX_REMEMBERED = 100_000


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ObservedStore:
    """A store that measures what passes through it; everything else is delegated as is."""

    def __init__(
        self,
        store: Any,
        *,
        clock: Callable[[], datetime] = _utcnow,
        job_label: bool = False,
    ) -> None:
        self._store = store
        self._clock = clock
        self._job_label = job_label
        self._claimed: dict[str, tuple[str, str]] = {}  # task run id -> (queue, job name)
        self._epoch = 0
        # Label children, looked up once: ``labels()`` costs more than the observation.
        self._delay: dict[str, Any] = {}
        self._lateness_children: dict[str, Any] = {}
        self._finished: dict[tuple[str, str], tuple[Any, Any]] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr) or name.startswith("_"):
            return attr
        wrapped = self._timed(name, attr)
        setattr(self, name, wrapped)  # once per method: later lookups skip __getattr__
        return wrapped

    def _timed(self, op: str, call: Callable[..., Any]) -> Callable[..., Any]:
        seconds = m.STORE_SECONDS.labels(op)
        after = getattr(self, f"_after_{op}", None)
        traced = getattr(self, f"_trace_{op}", None)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                result = await cast(Awaitable[Any], call(*args, **kwargs))
            except Fenced:
                m.FENCED.inc()
                raise
            except StoreUnavailable:
                m.STORE_ERRORS.labels(op).inc()
                raise
            finally:
                seconds.observe(time.perf_counter() - start)
            if after is not None:
                try:
                    after(result, *args, **kwargs)
                except Exception:  # a metrics bug must never fail the store's caller
                    log.exception("metrics of %s failed", op)
            if traced is not None and tracing.enabled():
                try:
                    traced(result, *args, **kwargs)
                except Exception:  # nor a tracing one
                    log.exception("tracing of %s failed", op)
            return result

        return timed

    # -- runs a cancel ends ---------------------------------------------------------------
    async def cancel_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        return await self._ending(run_id, "cancel_run", run_id, now)

    async def cancel_task_run(self, task_run_id: str, now: datetime) -> list[TaskRun]:
        task_run = await self._store.get_task_run(task_run_id)
        if task_run is None:  # the store's own NotFound, from the call itself
            return cast(list[TaskRun], await self._store.cancel_task_run(task_run_id, now))
        return await self._ending(task_run.run_id, "cancel_task_run", task_run_id, now)

    async def _ending(self, run_id: str, op: str, *args: Any) -> list[TaskRun]:
        """``op`` timed as any operation, and ``tickwork_runs_total{outcome="cancelled"}``
        moved if it took the run from unfinished to cancelled. (Running task runs are only
        asked to stop: their worker's outcome finishes the run, and counts it.)"""
        before = await self._run_state(run_id)
        result = cast(list[TaskRun], await self._timed(op, getattr(self._store, op))(*args))
        if before not in _FINISHED and await self._run_state(run_id) is RunState.CANCELLED:
            m.RUNS.labels(RunState.CANCELLED.value).inc()
        return result

    async def _run_state(self, run_id: str) -> RunState | None:
        found = await self._store.get_run(run_id)
        return None if found is None else found.run.state

    # -- what results tell -------------------------------------------------------------
    def _after_claim(self, claimed: list[TaskRun], _keys: Any, _worker: str, now: datetime) -> None:
        children = self._delay
        for tr in claimed:
            child = children.get(tr.queue)
            if child is None:
                child = children[tr.queue] = m.START_DELAY.labels(tr.queue)
            since = tr.queued_at or tr.due_at
            child.observe(max((now - since).total_seconds(), 0.0))
        self._remember(claimed)

    def _after_stale_running(self, stale: list[TaskRun], *_: Any) -> None:
        m.REAPED.inc(len(stale))
        self._remember(stale)

    @staticmethod
    def _after_record_alerts(recorded: Sequence[Alert], *_: Any, **__: Any) -> None:
        for alert in recorded:  # only the new ones: a look again records none
            m.RUN_ALERTS.labels(alert.kind.value).inc()

    def _after_queued_task_runs(self, lost: list[TaskRun], *_: Any) -> None:
        m.RESENT.inc(len(lost))

    def _after_complete(self, done: Completion, outcomes: Sequence[Outcome], **_: Any) -> None:
        applied = set(done.applied)
        counts: dict[tuple[str, str], int] = {}
        for outcome in outcomes:
            queue, job = self._claimed.pop(outcome.task_run_id, ("unknown", "unknown"))
            if outcome.task_run_id not in applied:
                continue
            key = (queue, OUTCOMES.get(outcome.state, str(outcome.state)))
            counts[key] = counts.get(key, 0) + 1
            if outcome.started_at is not None:
                ran = (outcome.finished_at - outcome.started_at).total_seconds()
                self._finished_children(key)[1].observe(max(ran, 0.0))
            if self._job_label:
                m.JOB_TASK_RUNS.labels(job, key[1]).inc()
        for key, n in counts.items():  # one increment per queue and outcome, not per job
            self._finished_children(key)[0].inc(n)
        for state, n in done.runs_finished.items():
            m.RUNS.labels(state).inc(n)

    def _finished_children(self, key: tuple[str, str]) -> tuple[Any, Any]:
        found = self._finished.get(key)
        if found is None:
            found = self._finished[key] = (m.TASK_RUNS.labels(*key), m.TASK_DURATION.labels(*key))
        return found

    def _after_mark_queued(
        self, queued: list[TaskRun], _keys: Any, now: datetime, **_: Any
    ) -> None:
        self._lateness(queued, now)

    def _after_materialize_many(
        self, queued: list[TaskRun], items: Sequence[Materialization], **_: Any
    ) -> None:
        self._lateness(queued, self._clock())
        missed = sum(1 for i in items for r in i.runs if r.run.trigger is RunTrigger.MISSED)
        if missed:
            m.MISSED_TICKS.inc(missed)
            m.RUNS.labels(RunState.SKIPPED.value).inc(missed)  # recorded finished as skipped

    def _after_next_work(self, _work: Any, _after: datetime) -> None:
        m.LAST_PASS.set(time.time())

    def _after_acquire_lease(self, lease: Lease | None, *_: Any) -> None:
        if lease is not None and lease.token != self._epoch:
            self._epoch = lease.token
            m.ELECTIONS.inc()
            m.LAST_PASS.set(time.time())  # a new leader's loop starts now: not stalled yet

    # -- what tracing records (observe.tracing; only when it is on) -------------------
    @staticmethod
    def _trace_claim(claimed: list[TaskRun], _keys: Any, worker: str, now: datetime) -> None:
        tracing.claimed(claimed, worker, now, time.time_ns())

    @staticmethod
    def _trace_create_jobs(
        _r: None, items: Sequence[tuple[Any, Sequence[NewRun]]], *_: Any
    ) -> None:
        tracing.runs_created([(nr.run, nr.run.id) for _job, runs in items for nr in runs])

    @staticmethod
    def _trace_create_runs(_r: None, runs: Sequence[NewRun], *_: Any) -> None:
        tracing.runs_created([(nr.run, nr.run.id) for nr in runs])

    @staticmethod
    def _trace_enqueue_runs(_r: None, copies: Sequence[RunCopy], *_: Any, **__: Any) -> None:
        tracing.runs_created([_copied(c) for c in copies])

    @staticmethod
    def _trace_enqueue_each(
        outcomes: list[Exception | None], entries: Sequence[EnqueueEntry]
    ) -> None:
        written = (e for e, o in zip(entries, outcomes, strict=True) if o is None)
        tracing.runs_created([_copied(c) for e in written for c in e.copies])

    @staticmethod
    def _trace_materialize_many(_r: Any, items: Sequence[Materialization], **_: Any) -> None:
        tracing.runs_created([(nr.run, nr.run.id) for i in items for nr in i.runs])

    def _lateness(self, task_runs: Iterable[TaskRun], now: datetime) -> None:
        children = self._lateness_children
        for tr in task_runs:
            child = children.get(tr.queue)
            if child is None:
                child = children[tr.queue] = m.SCHEDULE_DELAY.labels(tr.queue)
            child.observe(max((now - tr.due_at).total_seconds(), 0.0))

    def _remember(self, task_runs: Sequence[TaskRun]) -> None:
        if len(self._claimed) + len(task_runs) > MAX_REMEMBERED:
            self._claimed.clear()
        for tr in task_runs:
            self._claimed[tr.id] = (tr.queue, tr.job_name)


def observed_store(
    store: S, *, clock: Callable[[], datetime] = _utcnow, job_label: bool = False
) -> S:
    """``store`` with metrics, typed as ``store`` (it answers every call ``store`` does)."""
    return cast(S, ObservedStore(store, clock=clock, job_label=job_label))


class ObservedBroker:
    """A broker whose publishing and acknowledging are timed; consume is not (its time is
    mostly waiting for work, which says nothing about the broker)."""

    TIMED = frozenset({"publish", "send_ahead", "publish_at", "ack", "depths"})

    def __init__(self, broker: Any) -> None:
        self._broker = broker

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._broker, name)
        if name not in self.TIMED:
            return attr
        seconds = m.BROKER_SECONDS.labels(name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await attr(*args, **kwargs)
            finally:
                seconds.observe(time.perf_counter() - start)

        setattr(self, name, timed)
        return timed


def observed_broker(broker: S) -> S:
    return cast(S, ObservedBroker(broker))


def _copied(copy: RunCopy) -> tuple[Run, str]:
    """An enqueued run as it was stored: its template's, at its own instant; and its id."""
    run, at = copy.template.run, copy.enqueued_at
    if at is not None:
        run = dataclasses.replace(run, logical_date=at, created_at=at)
    return run, copy.run_id
