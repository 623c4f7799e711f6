"""Backfills: create (or plan, with ``dry_run``), list, show, pause, resume and cancel.

The service only records what the user asked for; the leader's scheduler loop creates the
runs, a window at a time (``scheduler/backfills.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from tickwork.core.backfill import (
    ACTIVE_STATES,
    Action,
    Backfill,
    BackfillSpec,
    BackfillState,
    Existing,
    Progress,
    all_dates,
    count_dates,
    decide,
    eta_seconds,
    validate_spec,
)
from tickwork.core.errors import Conflict, NotFound, ValidationError
from tickwork.core.model import Job, RunState, TaskRun
from tickwork.ports import CancelSignals, Store
from tickwork.ports.backfills import BackfillDate

#: Dates a dry run lists at most (it counts them all).
DRY_RUN_LIMIT = 10_000
#: A backfill of more dates than this is refused: split it.


@dataclass(frozen=True, slots=True)
class PlannedDate:
    """A date of a dry run: what the backfill would do, and the run the date has now."""

    logical_date: datetime
    action: Action
    run_id: str | None
    run_state: RunState | None


@dataclass(frozen=True, slots=True)
class BackfillPlan:
    """A dry run: the dates (the first ``DRY_RUN_LIMIT``) and the total."""

    job_name: str
    total: int
    dates: list[PlannedDate]


@dataclass(frozen=True, slots=True)
class BackfillView:
    """A backfill with its progress."""

    backfill: Backfill
    progress: Progress


class BackfillService:
    """The backfill use cases. ``wake`` tells the scheduler to take a step now."""

    def __init__(
        self,
        store: Store,
        *,
        get_job: Callable[[str], Awaitable[Job]],
        clock: Callable[[], datetime],
        make_id: Callable[[], str],
        wake: Callable[[], None],
        cancels: CancelSignals | None = None,
    ) -> None:
        self._store = store
        self._get_job = get_job
        self._clock = clock
        self._make_id = make_id
        self._wake = wake
        self._cancels = cancels

    async def plan(self, spec: BackfillSpec) -> BackfillPlan:
        """What ``create`` would do, date by date; writes nothing."""
        job = await self._get_job(spec.job_name)
        spec = validate_spec(spec, job)
        total = count_dates(job, spec.start, spec.end)
        dates = all_dates(job, spec.start, spec.end, DRY_RUN_LIMIT)
        if spec.reverse:
            dates.reverse()
        found = await self._store.runs_for_dates(job.id, dates)
        planned = []
        for date in dates:
            run = found.get(date)
            existing = None if run is None else Existing(*run)
            planned.append(
                PlannedDate(
                    logical_date=date,
                    action=decide(spec.reprocess, existing),
                    run_id=None if run is None else run[0],
                    run_state=None if run is None else run[1],
                )
            )
        return BackfillPlan(job_name=job.name, total=total, dates=planned)

    async def create(self, spec: BackfillSpec) -> BackfillView:
        """Record a backfill; the scheduler starts its runs. ``Conflict`` if an unfinished
        backfill of the job overlaps the range (the error names it)."""
        job = await self._get_job(spec.job_name)
        spec = validate_spec(spec, job)
        total = count_dates(job, spec.start, spec.end)
        if total == 0:
            raise ValidationError("from", "the job's schedule has no date in this range")
        now = self._clock()
        backfill = Backfill(
            id=self._make_id(),
            job_id=job.id,
            job_name=job.name,
            start=spec.start,
            end=spec.end,
            mode=spec.mode,
            max_active=spec.max_active,
            chunk_size=spec.chunk_size,
            reprocess=spec.reprocess,
            reverse=spec.reverse,
            priority=spec.priority,
            state=BackfillState.RUNNING,
            total=total,
            created_at=now,
            updated_at=now,
        )
        await self._store.create_backfill(backfill)
        self._wake()
        return await self.get(backfill.id)

    async def get(self, backfill_id: str) -> BackfillView:
        """A backfill and its progress; ``NotFound`` otherwise."""
        backfill = await self._backfill(backfill_id)
        return BackfillView(backfill, await self._progress(backfill))

    async def list_backfills(
        self, *, job: str | None = None, limit: int = 50
    ) -> list[BackfillView]:
        """Backfills, newest first (of one job, by name, when given)."""
        if not 1 <= limit <= 1000:
            raise ValidationError("limit", "must be between 1 and 1000")
        job_id = None if job is None else (await self._get_job(job)).id
        found = await self._store.list_backfills(job_id=job_id, limit=limit)
        return [BackfillView(b, await self._progress(b)) for b in found]

    async def dates(
        self, backfill_id: str, *, limit: int = 100, after: datetime | None = None
    ) -> list[BackfillDate]:
        """The dates the backfill has decided so far, in logical-date order."""
        await self._backfill(backfill_id)
        return await self._store.backfill_dates(backfill_id, limit=limit, after=after)

    async def pause(self, backfill_id: str) -> BackfillView:
        """Start no more runs; the ones started go on."""
        return await self._move(backfill_id, BackfillState.RUNNING, BackfillState.PAUSED)

    async def resume(self, backfill_id: str) -> BackfillView:
        """Go on from where it paused (after a failure in sequential mode too)."""
        view = await self._move(backfill_id, BackfillState.PAUSED, BackfillState.RUNNING)
        self._wake()
        return view

    async def cancel(self, backfill_id: str, *, kill: bool = False) -> BackfillView:
        """End the backfill: its runs not started yet are cancelled; running ones finish,
        or with ``kill`` are stopped by their workers."""
        backfill = await self._backfill(backfill_id)
        if backfill.state not in ACTIVE_STATES:
            raise Conflict(
                "backfill", f"backfill {backfill_id} has already ended ({backfill.state})"
            )
        running = await self._store.cancel_backfill(backfill_id, self._clock(), kill=kill)
        await self._tell_workers(running)
        return await self.get(backfill_id)

    async def _move(
        self, backfill_id: str, source: BackfillState, target: BackfillState
    ) -> BackfillView:
        backfill = await self._backfill(backfill_id)
        moved = await self._store.set_backfill_state(
            backfill_id, frozenset({source}), target, self._clock()
        )
        if not moved:
            raise Conflict(
                "backfill", f"backfill {backfill_id} is {backfill.state}, not {source.value}"
            )
        return await self.get(backfill_id)

    async def _backfill(self, backfill_id: str) -> Backfill:
        found = await self._store.get_backfill(backfill_id)
        if found is None:
            raise NotFound("backfill", backfill_id)
        return found

    async def _progress(self, backfill: Backfill) -> Progress:
        counts = await self._store.backfill_counts(backfill.id)
        outcomes = counts.by_outcome
        decided = sum(outcomes.values()) + counts.running
        remaining = max(backfill.total - decided, 0)
        if backfill.state not in ACTIVE_STATES:
            remaining = 0 if backfill.state is BackfillState.COMPLETED else remaining
        return Progress(
            total=backfill.total,
            succeeded=outcomes.get(RunState.SUCCESS.value, 0),
            failed=outcomes.get(RunState.FAILED.value, 0) + outcomes.get("cancelled", 0),
            skipped=outcomes.get(RunState.SKIPPED.value, 0),
            running=counts.running,
            remaining=remaining,
            eta_seconds=eta_seconds(backfill, remaining, counts.durations, running=counts.running),
        )

    async def _tell_workers(self, running: Sequence[TaskRun]) -> None:
        if running and self._cancels is not None:
            await self._cancels.request([(tr.id, tr.attempt) for tr in running])
