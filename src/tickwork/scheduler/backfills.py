"""Driving backfills: the leader's loop takes one step of every running backfill per tick.

A step reads the backfill's open dates (runs it started that had not finished), plans the
next dates with the pure core (``core.backfill``), and writes it all in one fenced
transaction conditional on the backfill's version. State lives in the database only, so a
restarted scheduler or a new leader after a failover just takes the next step: a date is
decided once (the cursor moves in the transaction that records it), never twice or lost.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from tickwork.core.backfill import (
    DEFAULT_SHARE,
    STEP_LOOKAHEAD,
    UNFINISHED_RUN,
    Action,
    Backfill,
    BackfillMode,
    BackfillState,
    Existing,
    Step,
    capacity,
    next_dates,
    plan_step,
)
from tickwork.core.model import Job, NewRun, RunState, RunTrigger, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ports import Fence, JobStore, WorkerRegistry
from tickwork.ports.backfills import BackfillStepWrite, BackfillStore, OpenDate

log = logging.getLogger("tickwork.scheduler.backfills")

#: Workers silent this long are not counted when sharing slots with backfills.
WORKER_SEEN = timedelta(seconds=30)
MAX_BACKFILLS_PER_TICK = 50


class BackfillDriverStore(BackfillStore, JobStore, WorkerRegistry, Protocol):
    """What the backfill driver needs of the store: backfills, their job, the live workers."""


class BackfillDriver:
    """Takes steps of running backfills. ``share`` is the fraction of the live workers' slots
    one backfill may fill (the rest is left to live work, which also goes first in the
    dispatch order and the broker's lanes)."""

    def __init__(
        self,
        store: BackfillDriverStore,
        *,
        make_id: Callable[[], str],
        fence: Callable[[], Fence | None],
        share: float = DEFAULT_SHARE,
    ) -> None:
        self._store = store
        self._make_id = make_id
        self._fence = fence
        self._share = share

    async def step(self, now: datetime) -> bool:
        """One step of every running backfill; True if any is running (poll again soon)."""
        running = await self._store.running_backfills(MAX_BACKFILLS_PER_TICK)
        if not running:
            return False
        slot_cap = await self._slot_cap(now)
        for backfill in running:
            await self.step_one(backfill, now, slot_cap)
        return True

    async def step_one(self, backfill: Backfill, now: datetime, slot_cap: int | None) -> bool:
        """Plan and write one step; False if nothing changed or another writer won."""
        job = await self._store.get_job(backfill.job_name)
        if job is None or job.id != backfill.job_id:
            return await self._end(backfill, now, "the job was deleted")
        opened = await self._store.open_dates(backfill.id)
        closed = [(o.logical_date, o.state) for o in opened if o.state not in UNFINISHED_RUN]
        active = len(opened) - len(closed)
        failure = _sequential_failure(backfill, opened)
        step = Step((), backfill.cursor, backfill.exhausted)
        room = capacity(backfill, active, slot_cap) if failure is None else 0
        if room > 0:
            dates = next_dates(job, backfill, STEP_LOOKAHEAD)
            found = await self._store.runs_for_dates(job.id, dates)
            existing = {d: Existing(rid, state) for d, (rid, state) in found.items()}
            step = plan_step(backfill, dates, existing, room)
        write = self._write(
            backfill, job, step, closed=closed, active=active, failure=failure, now=now
        )
        if write is None:
            return False
        return await self._store.step_backfill(write, fence=self._fence())

    def _write(
        self,
        backfill: Backfill,
        job: Job,
        step: Step,
        *,
        closed: Sequence[tuple[datetime, RunState]],
        active: int,
        failure: str | None,
        now: datetime,
    ) -> BackfillStepWrite | None:
        taken = sum(d.action is not Action.SKIP for d in step.decisions)
        state, reason = backfill.state, backfill.reason
        if failure is not None:
            state, reason = BackfillState.PAUSED, failure
        elif step.exhausted and active + taken == 0:
            state, reason = BackfillState.COMPLETED, None
        if not (closed or step.decisions or state is not backfill.state):
            return None
        by_action = {a: [d for d in step.decisions if d.action is a] for a in Action}
        return BackfillStepWrite(
            backfill_id=backfill.id,
            version=backfill.version,
            now=now,
            priority=backfill.priority,
            cursor=step.cursor,
            exhausted=step.exhausted,
            state=state,
            reason=reason,
            closed=closed,
            new_runs=[
                self._run(job, backfill, d.logical_date, now) for d in by_action[Action.CREATE]
            ],
            reruns=[(d.logical_date, _id(d.run_id)) for d in by_action[Action.RERUN]],
            tracked=[(d.logical_date, _id(d.run_id)) for d in by_action[Action.TRACK]],
            skipped=[(d.logical_date, _id(d.run_id)) for d in by_action[Action.SKIP]],
        )

    def _run(self, job: Job, backfill: Backfill, date: datetime, now: datetime) -> NewRun:
        made = new_run(
            job,
            date,
            trigger=RunTrigger.BACKFILL,
            now=now,
            make_id=self._make_id,
            state=TaskRunState.SCHEDULED,  # the dispatcher queues it: gates and order apply
            due_at=now,
        )
        runs = tuple(dataclasses.replace(tr, priority=backfill.priority) for tr in made.task_runs)
        return dataclasses.replace(made, task_runs=runs)

    async def _end(self, backfill: Backfill, now: datetime, reason: str) -> bool:
        log.warning("backfill %s cancelled: %s", backfill.id, reason)
        return await self._store.set_backfill_state(
            backfill.id, frozenset({backfill.state}), BackfillState.CANCELLED, now, reason
        )

    async def _slot_cap(self, now: datetime) -> int | None:
        workers = await self._store.list_workers(seen_since=now - WORKER_SEEN)
        slots = sum(w.concurrency for w in workers if w.stopped_at is None)
        return max(1, math.floor(slots * self._share)) if slots else None


def _sequential_failure(backfill: Backfill, opened: Sequence[OpenDate]) -> str | None:
    """In sequential mode a run that did not succeed pauses the backfill: the next date
    starts only after the previous one succeeded."""
    if backfill.mode is not BackfillMode.SEQUENTIAL:
        return None
    for o in opened:
        if o.state not in UNFINISHED_RUN and o.state is not RunState.SUCCESS:
            return (
                f"the run {o.run_id} for {o.logical_date.isoformat()} ended {o.state.value}; "
                "retry it and resume the backfill to go on"
            )
    return None


def _id(run_id: str | None) -> str:
    assert run_id is not None  # rerun, track and skip are decisions about an existing run
    return run_id
