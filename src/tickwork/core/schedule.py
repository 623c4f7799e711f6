"""Schedules: validation, first and upcoming fires, and catch-up planning after downtime."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tickwork.core import cron
from tickwork.core.errors import ValidationError
from tickwork.core.instants import RANGE_TEXT, in_range
from tickwork.core.model import Job, RunTrigger, Schedule, ScheduleKind

_TICK = timedelta(microseconds=1)  # fires fall on whole minutes, so this never skips one
_FOREVER = datetime(9000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class FirePlan:
    """What the scheduler materializes for a cron job whose ``next_fire_at`` has passed.

    ``runs`` are created (oldest first) with their triggers; ``skipped`` are recorded as skipped
    runs; ``dropped`` more missed fires are only counted; ``new_next`` becomes the job's
    ``next_fire_at`` (None when the schedule has ended). When ``new_next <= now`` the plan hit
    ``max_runs`` and the scheduler should plan again.
    """

    runs: list[tuple[datetime, RunTrigger]]
    skipped: list[datetime]
    dropped: int
    new_next: datetime | None


# -- validation ------------------------------------------------------------------------------


def validate_schedule(s: Schedule, now: datetime, *, allow_past: bool = False) -> Schedule:
    """Check a schedule and return it normalized: datetimes in UTC, the cron text normalized.

    Raises ``ValidationError`` naming the field (``schedule.cron``, ``schedule.at`` ...).
    """
    now = _instant(now, "now")
    kind = _kind(s.kind)
    if kind is ScheduleKind.CRON:
        return _validate_cron(s, now)
    _refuse(s.cron is not None, "schedule.cron", "only cron schedules take an expression")
    _refuse(s.start is not None, "schedule.start", "only cron schedules take a start bound")
    _refuse(s.end is not None, "schedule.end", "only cron schedules take an end bound")
    _refuse(
        s.timezone != "UTC",
        "schedule.timezone",
        "only cron schedules take a time zone; give the instant with its UTC offset instead",
    )
    if kind is ScheduleKind.NOW:
        _refuse(s.at is not None, "schedule.at", "a `now` schedule takes no instant; use `at`")
        return replace(s, kind=kind)
    return replace(s, kind=kind, at=_validate_at(s.at, now, allow_past))


def _kind(kind: str) -> ScheduleKind:
    try:
        return ScheduleKind(kind)
    except ValueError:
        raise ValidationError(
            "schedule.kind", f"{kind!r} is not a schedule kind; use now, at or cron"
        ) from None


def _refuse(condition: bool, field: str, reason: str) -> None:
    if condition:
        raise ValidationError(field, reason)


def _instant(value: object, field: str) -> datetime:
    if not isinstance(value, datetime):
        raise ValidationError(field, "must be a date and time such as 2026-12-01T10:00:00Z")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            field, "must include a UTC offset, such as 2026-12-01T10:00:00Z or +02:00"
        )
    if not in_range(value):
        raise ValidationError(field, RANGE_TEXT)
    return value.astimezone(UTC)


def _validate_at(at: datetime | None, now: datetime, allow_past: bool) -> datetime:
    if at is None:
        raise ValidationError("schedule.at", "an `at` schedule needs an instant to run at")
    instant = _instant(at, "schedule.at")
    if instant < now and not allow_past:
        raise ValidationError(
            "schedule.at",
            f"{instant.isoformat()} is in the past; pass allow_past to run it at once, "
            "or choose a later instant",
        )
    return instant


def _validate_cron(s: Schedule, now: datetime) -> Schedule:
    _refuse(s.at is not None, "schedule.at", "a cron schedule takes no `at` instant")
    if not s.cron:
        raise ValidationError(
            "schedule.cron", "a cron schedule needs an expression such as '30 2 * * *'"
        )
    expr, tz = cron.parse(s.cron), cron.zone(s.timezone)
    start = None if s.start is None else _instant(s.start, "schedule.start")
    end = None if s.end is None else _instant(s.end, "schedule.end")
    if start is not None and end is not None and start >= end:
        raise ValidationError("schedule.end", "must be later than schedule.start")
    normal = replace(s, kind=ScheduleKind.CRON, cron=expr.text, start=start, end=end)
    if cron.next_fire(expr, tz, now) is None:
        raise ValidationError(
            "schedule.cron", f"{expr.text!r} never fires (no such date); check the day fields"
        )
    if first_fire(normal, now) is None:
        raise ValidationError(
            "schedule.end", "the schedule ends before its next fire; use a later end or none"
        )
    return normal


# -- fires -----------------------------------------------------------------------------------


def _cron_of(s: Schedule) -> tuple[cron.CronExpr, ZoneInfo]:
    if s.cron is None:
        raise ValueError("not a cron schedule")
    return cron.parse(s.cron), cron.zone(s.timezone)


def _floor(s: Schedule, after: datetime) -> datetime:
    """Fires must come strictly after this: ``after``, or just before an inclusive start."""
    after = after.astimezone(UTC)
    return after if s.start is None else max(after, s.start - _TICK)


def _within(s: Schedule, fire: datetime | None) -> datetime | None:
    return fire if fire is not None and (s.end is None or fire <= s.end) else None


def first_fire(s: Schedule, now: datetime) -> datetime | None:
    """When a (validated) schedule first fires: a cron fire after ``now`` at or after
    ``start`` and not after ``end`` (None if there is none), the ``at`` instant, or ``now``."""
    if s.kind is ScheduleKind.CRON:
        expr, tz = _cron_of(s)
        return _within(s, cron.next_fire(expr, tz, _floor(s, now)))
    if s.kind is ScheduleKind.AT:
        return None if s.at is None else s.at.astimezone(UTC)
    return now.astimezone(UTC)


def upcoming(s: Schedule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fires strictly after ``after`` (UTC), respecting start and end.

    A ``now`` schedule has no upcoming fires: it fires once, when the job is created.
    """
    if s.kind is ScheduleKind.CRON:
        expr, tz = _cron_of(s)
        return cron.fires(expr, tz, _floor(s, after), s.end or _FOREVER, count)
    if s.kind is ScheduleKind.AT and s.at is not None and s.at > after and count > 0:
        return [s.at.astimezone(UTC)]
    return []


# -- catch-up --------------------------------------------------------------------------------


def plan_fires(
    job: Job, now: datetime, *, max_runs: int = 500, max_skipped: int = 10_000
) -> FirePlan:
    """Plan the fires of a cron job from ``job.next_fire_at`` (inclusive) to ``now``.

    With ``catchup`` every missed fire becomes a run (at most ``max_runs`` per plan); without
    it only the newest fire runs and the older ones are skipped (the newest ``max_skipped`` of
    them listed, the rest counted in ``dropped``). The newest fire at or before ``now`` has
    trigger SCHEDULE, older ones CATCHUP. Cost follows the runs and skips listed, not the
    length of the outage.
    """
    if job.schedule.kind is not ScheduleKind.CRON or job.next_fire_at is None:
        raise ValueError(f"job {job.name!r} is not a cron job with a next_fire_at")
    s, now = job.schedule, now.astimezone(UTC)
    expr, tz = _cron_of(s)
    span = _Span(
        expr=expr,
        tz=tz,
        after=_floor(s, job.next_fire_at - _TICK),
        until=now if s.end is None else min(now, s.end),
        following=_within(s, cron.next_fire(expr, tz, now)),
    )
    if job.catchup:
        return _plan_catchup(span, max_runs)
    return _plan_latest(span, max_skipped)


def plan_ahead(
    job: Job, now: datetime, horizon: datetime, *, max_runs: int = 500, max_skipped: int = 10_000
) -> FirePlan:
    """Plan a cron job's fires up to ``horizon`` (``now`` or later): the missed ones up to
    ``now`` by the catch-up rule (``plan_fires``), then every fire in ``(now, horizon]`` as a
    SCHEDULE run. A fire that is not due yet was not missed, whatever the catch-up rule.

    At most ``max_runs`` runs per plan; ``new_next <= horizon`` means the plan hit that limit
    and the scheduler should plan again.
    """
    if job.next_fire_at is None or job.schedule.kind is not ScheduleKind.CRON:
        raise ValueError(f"job {job.name!r} is not a cron job with a next_fire_at")
    past = FirePlan(runs=[], skipped=[], dropped=0, new_next=job.next_fire_at)
    if job.next_fire_at <= now:
        past = plan_fires(job, now, max_runs=max_runs, max_skipped=max_skipped)
    if past.new_next is None or past.new_next <= now:  # the schedule ended, or more to catch up
        return past
    s, room = job.schedule, max_runs - len(past.runs)
    expr, tz = _cron_of(s)
    until = horizon if s.end is None else min(horizon, s.end)
    ahead = cron.fires(expr, tz, past.new_next - _TICK, until, room + 1)
    if len(ahead) > room:
        new_next: datetime | None = ahead[room]
    else:
        new_next = _within(s, cron.next_fire(expr, tz, max(horizon, past.new_next - _TICK)))
    return FirePlan(
        runs=past.runs + [(fire, RunTrigger.SCHEDULE) for fire in ahead[:room]],
        skipped=past.skipped,
        dropped=past.dropped,
        new_next=new_next,
    )


@dataclass(frozen=True, slots=True)
class _Span:
    """The missed stretch of a cron job: fires in ``(after, until]``; ``following`` is the
    first fire after ``now`` within the schedule's end."""

    expr: cron.CronExpr
    tz: ZoneInfo
    after: datetime
    until: datetime
    following: datetime | None


def _plan_catchup(span: _Span, max_runs: int) -> FirePlan:
    due = cron.fires(span.expr, span.tz, span.after, span.until, max_runs + 1)
    if len(due) > max_runs:  # more than one plan's worth: the next plan starts at due[-1]
        runs = [(fire, RunTrigger.CATCHUP) for fire in due[:max_runs]]
        return FirePlan(runs=runs, skipped=[], dropped=0, new_next=due[-1])
    runs = [(fire, RunTrigger.CATCHUP) for fire in due[:-1]]
    runs += [(fire, RunTrigger.SCHEDULE) for fire in due[-1:]]
    return FirePlan(runs=runs, skipped=[], dropped=0, new_next=span.following)


def _plan_latest(span: _Span, max_skipped: int) -> FirePlan:
    # The usual case is a scheduler on time: at most one fire is due. Looking two fires
    # ahead from ``after`` settles it cheaply; walking back from ``until`` day by day
    # (latest_fires) is only worth it when fires were really missed.
    head = cron.fires(span.expr, span.tz, span.after, span.until, 2)
    if len(head) < 2:
        runs = [(fire, RunTrigger.SCHEDULE) for fire in head]
        return FirePlan(runs=runs, skipped=[], dropped=0, new_next=span.following)
    newest = cron.latest_fires(span.expr, span.tz, span.after, span.until, max_skipped + 1)
    if not newest:
        return FirePlan(runs=[], skipped=[], dropped=0, new_next=span.following)
    dropped = 0
    if len(newest) > max_skipped:  # there may be older misses than the ones listed
        dropped = cron.count_fires(span.expr, span.tz, span.after, newest[0] - _TICK)
    return FirePlan(
        runs=[(newest[-1], RunTrigger.SCHEDULE)],
        skipped=newest[:-1],
        dropped=dropped,
        new_next=span.following,
    )


# -- ranges (backfills, the ledger) ----------------------------------------------------------


def fires_in(s: Schedule, after: datetime, until: datetime, limit: int) -> list[datetime]:
    """A cron schedule's fires in ``(after, until]``, oldest first, at most ``limit``, within
    its start and end bounds: the code live scheduling uses, so a backfill or the ledger
    sees exactly the dates the scheduler would have made (DST rules included)."""
    expr, tz = _cron_of(s)
    end = until if s.end is None else min(until, s.end)
    return cron.fires(expr, tz, _floor(s, after), end, limit)


def latest_fires_in(s: Schedule, after: datetime, until: datetime, limit: int) -> list[datetime]:
    """The newest ``limit`` fires of ``fires_in(s, after, until)``, oldest first."""
    expr, tz = _cron_of(s)
    end = until if s.end is None else min(until, s.end)
    floor = _floor(s, after)
    return cron.latest_fires(expr, tz, floor, end, limit) if floor < end else []


def count_fires_in(s: Schedule, after: datetime, until: datetime, cap: int | None = None) -> int:
    """How many fires ``fires_in(s, after, until)`` would list, without listing them (with
    ``cap``: any number above it once the count passes it)."""
    expr, tz = _cron_of(s)
    end = until if s.end is None else min(until, s.end)
    floor = _floor(s, after)
    return cron.count_fires(expr, tz, floor, end, cap) if floor < end else 0
