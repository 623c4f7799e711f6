"""The ``BackfillStore`` port: backfills and the record of the dates they have decided."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from tickwork.core.backfill import Backfill, BackfillState
from tickwork.core.model import NewRun, RunState, TaskRun
from tickwork.ports.coordination import Fence


@dataclass(frozen=True, slots=True)
class OpenDate:
    """A date of a backfill whose run had not finished when last looked at."""

    logical_date: datetime
    run_id: str
    state: RunState


@dataclass(frozen=True, slots=True)
class BackfillStepWrite:
    """What one step of a backfill writes, conditional on its ``version``.

    ``closed``: open dates whose run has finished, with the run's final state. ``new_runs``:
    runs to create (trigger ``backfill``); a date taken by another run meanwhile is followed
    instead. ``reruns``: (date, run id) of finished runs given one more attempt at
    ``priority``. ``tracked``: (date, run id) of unfinished runs followed. ``skipped``: (date,
    run id) kept as they are. Then the backfill's cursor, state and reason are set.
    """

    backfill_id: str
    version: int
    now: datetime
    priority: int
    cursor: datetime | None
    exhausted: bool
    state: BackfillState
    reason: str | None = None
    closed: Sequence[tuple[datetime, RunState]] = ()
    new_runs: Sequence[NewRun] = ()
    reruns: Sequence[tuple[datetime, str]] = ()
    tracked: Sequence[tuple[datetime, str]] = ()
    skipped: Sequence[tuple[datetime, str]] = ()


@dataclass(frozen=True, slots=True)
class BackfillCounts:
    """Dates of a backfill by outcome (``running``: decided, run unfinished), with the
    durations in seconds of up to 100 of its newest finished runs (for an ETA)."""

    by_outcome: dict[str, int]
    running: int
    durations: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BackfillDate:
    """One decided date of a backfill: its run, the action taken, and the outcome."""

    logical_date: datetime
    run_id: str
    action: str
    outcome: str | None
    run_state: RunState | None


class BackfillStore(Protocol):
    """Backfills. Every write is conditional on the backfill's ``version`` (and the leader's
    writes on its fence), so a stale writer changes nothing and no date is decided twice."""

    async def create_backfill(self, backfill: Backfill) -> None:
        """Insert a backfill. ``Conflict("range", ...)`` naming the other backfill if an
        unfinished backfill of the same job overlaps the range; then nothing is written."""

    async def get_backfill(self, backfill_id: str) -> Backfill | None: ...

    async def list_backfills(self, *, job_id: str | None = None, limit: int = 50) -> list[Backfill]:
        """Newest first."""

    async def running_backfills(self, limit: int) -> list[Backfill]:
        """Backfills in state ``running``, oldest first."""

    async def open_dates(self, backfill_id: str) -> list[OpenDate]:
        """The backfill's dates whose run was unfinished at the last step, with the run's
        state now."""

    async def runs_for_dates(
        self, job_id: str, dates: Sequence[datetime]
    ) -> dict[datetime, tuple[str, RunState]]:
        """The job's runs (not enqueued ones) for these logical dates: date -> (id, state)."""

    async def step_backfill(self, step: BackfillStepWrite, *, fence: Fence | None = None) -> bool:
        """Write one step (see ``BackfillStepWrite``) in one transaction; False, and nothing
        written, if the backfill's version is no longer ``step.version``."""

    async def set_backfill_state(
        self,
        backfill_id: str,
        expected: frozenset[BackfillState],
        state: BackfillState,
        now: datetime,
        reason: str | None = None,
    ) -> bool:
        """Move a backfill from one of ``expected`` to ``state`` (version + 1); False if it
        was in another state."""

    async def cancel_backfill(
        self, backfill_id: str, now: datetime, *, kill: bool
    ) -> list[TaskRun]:
        """Cancel an unfinished backfill and the runs of its open dates that have not started
        (with ``kill``, running ones too: returned with ``cancel_requested``, for their
        workers), in one transaction. Runs already finished are left alone."""

    async def backfill_counts(self, backfill_id: str) -> BackfillCounts: ...

    async def backfill_dates(
        self, backfill_id: str, *, limit: int = 100, after: datetime | None = None
    ) -> list[BackfillDate]:
        """The decided dates in logical-date order, after ``after``."""
