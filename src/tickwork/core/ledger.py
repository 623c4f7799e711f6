"""The schedule ledger: every tick a cron schedule promised in a range, and what became of it.

The ticks come from the cron expression itself (``core.cron``, the code live scheduling
uses), not from what ran, so a tick nobody acted on still shows up. Each is matched with the
run for its logical date (runs are unique per job and logical date):

- ``ran``: a run exists (its id and state); ``backfilled``: that run was made or re-run by a
  backfill; ``skipped``: recorded as skipped (a missed fire of a job without catch-up);
- ``paused``: no run, and the job is paused since before the tick;
- ``before_start`` / ``after_end``: outside the schedule's bounds, or before the job existed;
- ``upcoming``: not due yet; ``due``: due, its run not started yet but within the grace;
- ``late``: its run exists but has not started within the grace (no worker, a full pool...);
- ``missed``: no run and no reason on record (a bug or an outage).

On daylight-saving nights each tick says which rule applied (``dst``): ``gap`` (the wall time
did not exist: it fired at the first valid minute after), ``fold`` (a repeated wall time:
once, at its first occurrence, for a wall-time expression), ``fold_twice`` (an elapsed-time
expression such as ``0 * * * *`` fires in both occurrences of the hour).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from tickwork.core import cron
from tickwork.core.cron_fields import compile_spec
from tickwork.core.errors import ValidationError
from tickwork.core.jitter import effective_jitter
from tickwork.core.model import Job, RunState, RunTrigger, ScheduleKind

_TICK = timedelta(microseconds=1)
#: Ticks one ledger lists at most: narrow the range for more.
MAX_TICKS = 10_000
#: How long after its logical date a tick's run may take to start before it counts as missed.
DEFAULT_GRACE = timedelta(minutes=5)


class TickStatus(StrEnum):
    RAN = "ran"
    BACKFILLED = "backfilled"
    SKIPPED = "skipped"
    PAUSED = "paused"
    MISSED = "missed"
    LATE = "late"
    DUE = "due"
    UPCOMING = "upcoming"
    BEFORE_START = "before_start"
    AFTER_END = "after_end"


@dataclass(frozen=True, slots=True)
class RunMark:
    """What the ledger needs of a run."""

    run_id: str
    logical_date: datetime
    state: RunState
    trigger: RunTrigger
    started_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Tick:
    logical_date: datetime
    status: TickStatus
    run_id: str | None = None
    run_state: RunState | None = None
    dst: str | None = None  # "gap", "fold" or "fold_twice" on daylight-saving nights


def promised(job: Job, start: datetime, end: datetime) -> list[datetime]:
    """Every tick of the job's cron expression in ``[start, end]``, bounds ignored (the
    ledger labels the ones outside them). ``ValidationError`` past ``MAX_TICKS``."""
    if job.schedule.kind is not ScheduleKind.CRON or job.schedule.cron is None:
        raise ValidationError("job", f"job {job.name!r} has no cron schedule: it has no ticks")
    if start.utcoffset() is None or end.utcoffset() is None:
        raise ValidationError("from", "must include a UTC offset, e.g. 2026-12-01T00:00:00Z")
    if start > end:
        raise ValidationError("to", "must not be earlier than from")
    expr, tz = cron.parse(job.schedule.cron), cron.zone(job.schedule.timezone)
    ticks = cron.fires(expr, tz, start.astimezone(UTC) - _TICK, end, MAX_TICKS + 1)
    if len(ticks) > MAX_TICKS:
        raise ValidationError("to", f"more than {MAX_TICKS} ticks in the range; narrow it")
    return ticks


def ledger(
    job: Job,
    ticks: Sequence[datetime],
    runs: Mapping[datetime, RunMark],
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    spread: float = 0.0,
) -> list[Tick]:
    """Match each promised tick with its run (see the module docstring). A jittered job's
    run may be due up to its jitter (or the fleet's ``spread``) after the tick: the grace
    starts at the end of that window."""
    assert job.schedule.cron is not None
    grace += timedelta(seconds=effective_jitter(job.jitter, spread))
    spec, tz = compile_spec(cron.parse(job.schedule.cron).text), cron.zone(job.schedule.timezone)
    return [
        Tick(
            logical_date=t,
            status=_status(job, t, runs.get(t), now, grace),
            run_id=None if (run := runs.get(t)) is None else run.run_id,
            run_state=None if run is None else run.state,
            dst=_dst(t, tz, wall_clock=spec.wall_clock, hours=spec.hours, minutes=spec.minutes),
        )
        for t in ticks
    ]


def missed(ticks: Sequence[Tick]) -> list[Tick]:
    """The ticks with no run and no reason on record, or whose run has not started within
    the grace."""
    return [t for t in ticks if t.status in (TickStatus.MISSED, TickStatus.LATE)]


def _status(
    job: Job, t: datetime, run: RunMark | None, now: datetime, grace: timedelta
) -> TickStatus:
    s = job.schedule
    if (s.start is not None and t < s.start) or (run is None and t < job.created_at):
        return TickStatus.BEFORE_START
    if s.end is not None and t > s.end:
        return TickStatus.AFTER_END
    if t > now:
        return TickStatus.UPCOMING
    if run is not None:
        if run.trigger is RunTrigger.MISSED or run.state is RunState.SKIPPED:
            return TickStatus.SKIPPED
        if run.trigger is RunTrigger.BACKFILL:
            return TickStatus.BACKFILLED
        if run.started_at is None and run.state in (RunState.SCHEDULED, RunState.QUEUED):
            return TickStatus.DUE if now - t <= grace else TickStatus.LATE
        return TickStatus.RAN
    if job.paused and t >= job.updated_at:
        return TickStatus.PAUSED
    return TickStatus.DUE if now - t <= grace else TickStatus.MISSED


def _dst(
    t: datetime,
    tz: ZoneInfo,
    *,
    wall_clock: bool,
    hours: tuple[int, ...],
    minutes: tuple[int, ...],
) -> str | None:
    local = t.astimezone(tz)
    naive = local.replace(tzinfo=None)
    offsets = {naive.replace(tzinfo=tz, fold=f).utcoffset() for f in (0, 1)}
    if len(offsets) > 1:  # a repeated wall time
        return "fold" if wall_clock else "fold_twice"
    if wall_clock and (local.hour not in hours or local.minute not in minutes):
        return "gap"  # moved past a wall time that did not exist
    return None
