"""Backfill planning: which logical dates a backfill covers, and what each step does.

A backfill is lazy. It keeps a ``cursor`` (the last logical date it has decided about, in its
order) and, at each step of the leader's loop, decides the next few dates: as many as its
mode lets run now. Nothing here does I/O; the store reads the snapshot a step needs, the
planner decides, the store writes the decisions conditionally on the backfill's ``version``.

Dates come from ``core.schedule.fires_in``: the code live scheduling uses, DST rules
included, so a backfill can neither invent a date the schedule never had nor miss one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from tickwork.core.errors import ValidationError
from tickwork.core.model import Job, RunState, ScheduleKind
from tickwork.core.schedule import count_fires_in, fires_in, latest_fires_in

_TICK = timedelta(microseconds=1)
_E = TypeVar("_E", bound=StrEnum)

#: The default priority of a backfill's task runs: below the default (0), so brokers put them
#: in their ``low`` lane and the dispatcher queues live work first.
DEFAULT_PRIORITY = -10
DEFAULT_MAX_ACTIVE = 8
DEFAULT_CHUNK_SIZE = 10
MAX_ACTIVE_LIMIT = 1000
#: The share of the live workers' slots a backfill may fill; the rest stays for live work.
DEFAULT_SHARE = 0.5
MAX_SPAN = timedelta(days=100 * 366)
#: The most dates one backfill may hold.
MAX_DATES = 1_000_000
_EARLIEST, _LATEST = datetime(1970, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC)
#: Dates a step looks at, at most (skipped ones included): a step's cost stays bounded.
STEP_LOOKAHEAD = 500


class BackfillMode(StrEnum):
    SEQUENTIAL = "sequential"  # one run at a time, in order; a failure pauses the backfill
    PARALLEL = "parallel"  # up to ``max_active`` runs at once
    CHUNKED = "chunked"  # ``chunk_size`` dates at once; the next chunk after this one ends


class Reprocess(StrEnum):
    """Which dates that already have a run get a new attempt."""

    NONE = "none"  # only dates without a run (or with a skipped one)
    FAILED = "failed"  # ... and dates whose run failed or was cancelled
    ALL = "all"  # every date; a finished run gets one more attempt, its history kept


class BackfillState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


ACTIVE_STATES = frozenset({BackfillState.RUNNING, BackfillState.PAUSED})
UNFINISHED_RUN = frozenset({RunState.SCHEDULED, RunState.QUEUED, RunState.RUNNING})


class Action(StrEnum):
    """What a step does with one date. ``create``, ``rerun`` and ``track`` take a slot."""

    CREATE = "create"  # no run for the date: create one, trigger ``backfill``
    RERUN = "rerun"  # a finished run: one more attempt of it, trigger becomes ``backfill``
    TRACK = "track"  # an unfinished run exists: never touched, followed until it ends
    SKIP = "skip"  # a run the reprocess rule keeps (a success, or a failure with ``none``)


@dataclass(frozen=True, slots=True)
class BackfillSpec:
    """What a user asks for. ``start`` and ``end`` are inclusive logical dates."""

    job_name: str
    start: datetime
    end: datetime
    mode: BackfillMode = BackfillMode.PARALLEL
    max_active: int = DEFAULT_MAX_ACTIVE
    chunk_size: int = DEFAULT_CHUNK_SIZE
    reprocess: Reprocess = Reprocess.NONE
    reverse: bool = False
    priority: int = DEFAULT_PRIORITY


@dataclass(frozen=True, slots=True)
class Backfill:
    """A backfill as stored. ``cursor``: the last date decided (None before the first step);
    ``version`` increases with every write, which makes each write conditional."""

    id: str
    job_id: str
    job_name: str
    start: datetime
    end: datetime
    mode: BackfillMode
    max_active: int
    chunk_size: int
    reprocess: Reprocess
    reverse: bool
    priority: int
    state: BackfillState
    total: int  # dates the schedule gives in the range
    created_at: datetime
    updated_at: datetime
    cursor: datetime | None = None
    exhausted: bool = False  # every date has been decided
    version: int = 1
    finished_at: datetime | None = None
    reason: str | None = None  # why it paused or ended, in a sentence


@dataclass(frozen=True, slots=True)
class Decision:
    logical_date: datetime
    action: Action
    run_id: str | None = None  # the existing run (rerun, track, skip)


@dataclass(frozen=True, slots=True)
class Step:
    """What one step decides: ``decisions`` in the backfill's order, the new cursor, and
    whether the range is used up after them."""

    decisions: tuple[Decision, ...]
    cursor: datetime | None
    exhausted: bool


@dataclass(frozen=True, slots=True)
class Existing:
    """A run that exists for a date."""

    run_id: str
    state: RunState


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a backfill is: counts of its dates, and an estimate of the time left."""

    total: int
    succeeded: int
    failed: int
    skipped: int
    running: int
    remaining: int
    eta_seconds: float | None

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.skipped


# -- validation ------------------------------------------------------------------------------


def validate_spec(spec: BackfillSpec, job: Job) -> BackfillSpec:
    """Check a spec against its job; ``ValidationError`` names the field at fault."""
    if job.schedule.kind is not ScheduleKind.CRON:
        raise ValidationError(
            "job", f"job {job.name!r} has no cron schedule; only cron jobs can be backfilled"
        )
    start, end = _aware(spec.start, "from"), _aware(spec.end, "to")
    if start > end:
        raise ValidationError("to", "must not be earlier than from")
    if end - start > MAX_SPAN:
        raise ValidationError("to", f"the range may span {MAX_SPAN.days} days at most")
    _between(spec.max_active, 1, MAX_ACTIVE_LIMIT, "max_active")
    _between(spec.chunk_size, 1, MAX_ACTIVE_LIMIT, "chunk_size")
    _between(spec.priority, -1_000_000, 1_000_000, "priority")
    if spec.reverse and job.depends_on_past:
        raise ValidationError(
            "reverse", "the job has depends_on_past: each date waits for the one before it"
        )
    return replace(
        spec,
        start=start,
        end=end,
        mode=_member(BackfillMode, spec.mode, "mode"),
        reprocess=_member(Reprocess, spec.reprocess, "reprocess"),
    )


def _aware(value: datetime, field: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "must include a UTC offset, e.g. 2026-12-01T00:00:00Z")
    if not _EARLIEST.year <= value.year < _LATEST.year:
        raise ValidationError(field, f"must be in the years {_EARLIEST.year} to {_LATEST.year - 1}")
    return value.astimezone(UTC)


def _between(value: int, low: int, high: int, field: str) -> None:
    if not low <= value <= high:
        raise ValidationError(field, f"must be between {low} and {high}")


def _member(kind: type[_E], value: str, field: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(kind)
        raise ValidationError(field, f"{value!r} is not one of {names}") from None


# -- dates -----------------------------------------------------------------------------------


def count_dates(job: Job, start: datetime, end: datetime) -> int:
    """How many logical dates the job's schedule gives in ``[start, end]``;
    ``ValidationError`` (field ``to``) above ``MAX_DATES``, found without counting them all."""
    total = count_fires_in(job.schedule, start - _TICK, end, cap=MAX_DATES)
    if total > MAX_DATES:
        raise ValidationError("to", f"over {MAX_DATES} dates; at most {MAX_DATES} per backfill")
    return total


def next_dates(job: Job, backfill: Backfill, limit: int) -> list[datetime]:
    """The next ``limit`` dates after the cursor, in the backfill's order."""
    if backfill.reverse:
        until = backfill.end if backfill.cursor is None else backfill.cursor - _TICK
        newest = latest_fires_in(job.schedule, backfill.start - _TICK, until, limit)
        return newest[::-1]
    after = backfill.start - _TICK if backfill.cursor is None else backfill.cursor
    return fires_in(job.schedule, after, backfill.end, limit)


def all_dates(job: Job, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """The first ``limit`` dates of ``[start, end]``, oldest first (a dry run)."""
    return fires_in(job.schedule, start - _TICK, end, limit)


# -- steps -----------------------------------------------------------------------------------


def capacity(backfill: Backfill, active: int, slot_cap: int | None = None) -> int:
    """How many more runs the backfill may start now, with ``active`` of its runs unfinished.

    ``slot_cap`` is the share of live worker slots backfills may fill (None: unknown, no
    cap); it never lowers a backfill below one run at a time.
    """
    if backfill.state is not BackfillState.RUNNING or backfill.exhausted:
        return 0
    if backfill.mode is BackfillMode.SEQUENTIAL:
        return 1 if active == 0 else 0
    if backfill.mode is BackfillMode.CHUNKED:
        return backfill.chunk_size if active == 0 else 0
    limit = backfill.max_active if slot_cap is None else min(backfill.max_active, slot_cap)
    return max(max(limit, 1) - active, 0)


def decide(reprocess: Reprocess, existing: Existing | None) -> Action:
    """What to do with a date, given the run it already has (or none)."""
    if existing is None or existing.state is RunState.SKIPPED:
        return Action.CREATE if existing is None else Action.RERUN
    if existing.state in UNFINISHED_RUN:
        return Action.TRACK
    if reprocess is Reprocess.ALL:
        return Action.RERUN
    if reprocess is Reprocess.FAILED and existing.state is not RunState.SUCCESS:
        return Action.RERUN
    return Action.SKIP


def plan_step(
    backfill: Backfill,
    dates: Sequence[datetime],
    existing: Mapping[datetime, Existing],
    room: int,
    *,
    lookahead: int = STEP_LOOKAHEAD,
) -> Step:
    """Decide ``dates`` (the next ones after the cursor, at most ``lookahead``) in order until
    ``room`` runs are taken; skipped dates take no room. The cursor moves to the last date
    decided, so a date is decided exactly once over the life of the backfill."""
    decisions: list[Decision] = []
    cursor, taken = backfill.cursor, 0
    for date in dates:
        if taken >= room:
            break
        found = existing.get(date)
        action = decide(backfill.reprocess, found)
        decisions.append(Decision(date, action, None if found is None else found.run_id))
        taken += action is not Action.SKIP
        cursor = date
    exhausted = len(dates) < lookahead and len(decisions) == len(dates)
    return Step(tuple(decisions), cursor, exhausted)


def parallelism(backfill: Backfill) -> int:
    if backfill.mode is BackfillMode.SEQUENTIAL:
        return 1
    if backfill.mode is BackfillMode.CHUNKED:
        return backfill.chunk_size
    return backfill.max_active


def eta_seconds(
    backfill: Backfill, left: int, durations: Sequence[float], *, running: int = 0
) -> float | None:
    """Time left: the mean duration of its finished runs times the waves of runs left.
    None before any run has finished."""
    if left + running == 0:
        return 0.0
    if not durations:
        return None
    mean = sum(durations) / len(durations)
    return mean * math.ceil((left + running) / parallelism(backfill))
