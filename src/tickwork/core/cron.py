"""Cron expressions evaluated in an IANA zone, with Debian cron's daylight-saving rules.

The rules (the ones cronsim implements, see ``reference/ecosystem.md`` c.1):

- an expression whose minute **and** hour fields are specific (neither starts with ``*``) is
  evaluated in wall time: a wall time that does not exist (spring forward) fires once at the first
  valid minute after it, and a repeated wall time (fall back) fires once, at its first occurrence;
- an expression whose minute or hour field starts with ``*`` (``*``, ``*/15``) follows real elapsed
  time: it fires at every real instant whose wall clock matches, so ``0 * * * *`` fires at both
  01:00s of a fall-back night and ``*/15 * * * *`` every 15 real minutes.

croniter finds the calendar days an expression selects. We own everything else: the grammar
(``cron_fields``), the times of day, and the daylight-saving rules above, which croniter does
not follow (it fires a repeated 01:30 twice). Fires are computed a day at a time: on a day
without an offset change they are plain arithmetic, which keeps planning over long outages
cheap.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import islice, takewhile
from zoneinfo import ZoneInfo, available_timezones

from croniter import croniter

from tickwork.core.cron_fields import CronExpr, CronSpec, compile_spec, parse
from tickwork.core.errors import ValidationError

__all__ = [
    "CronExpr",
    "count_fires",
    "describe",
    "fires",
    "latest_fires",
    "next_fire",
    "parse",
    "zone",
]

_ONE_DAY = timedelta(days=1)
_LAST_DAY = date(9999, 12, 1)  # stop well before datetime's range ends


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (such as ``Europe/Berlin``), or a ValidationError."""
    if not isinstance(name, str) or name not in _zone_names():
        raise ValidationError(
            "schedule.timezone",
            f"{name!r} is not an IANA time zone; use a name such as 'UTC' or 'Europe/Berlin'",
        )
    return ZoneInfo(name)


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    # The system zone directory may also hold "localtime" (this machine's zone, which would
    # make a job mean different things on different hosts) and "posixrules".
    return frozenset(available_timezones()) - {"localtime", "posixrules"}


def describe(expr: CronExpr) -> str:
    """A short English reading of the expression's time fields (best effort)."""
    minute, hour, dom, month, dow = expr.text.split()
    when = f"at minute {minute} of hour {hour}"
    if minute.isdigit() and hour.isdigit():
        when = f"at {int(hour):02d}:{int(minute):02d}"
    days = [f"day-of-month {dom}"] if dom != "*" else []
    days += [f"month {month}"] if month != "*" else []
    days += [f"day-of-week {dow}"] if dow != "*" else []
    return when + (" on " + ", ".join(days) if days else " every day")


# -- fires -----------------------------------------------------------------------------------


def next_fire(expr: CronExpr, tz: ZoneInfo, after: datetime) -> datetime | None:
    """The first fire strictly after ``after`` (aware), in UTC; None if the expression never
    fires again (``0 0 30 2 *``)."""
    return next(_iter_fires(compile_spec(expr.text), tz, _aware(after)), None)


def fires(
    expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """Fires in ``(after, until]``, oldest first, at most ``limit`` of them, in UTC."""
    until = _aware(until)
    found = _iter_fires(compile_spec(expr.text), tz, _aware(after))
    return list(islice(takewhile(lambda fire: fire <= until, found), max(limit, 0)))


def latest_fires(
    expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """The newest ``limit`` fires in ``(after, until]``, oldest first, in UTC.

    Walks back from ``until`` a day at a time, so the cost follows ``limit``, not the length
    of the range.
    """
    spec, after, until = compile_spec(expr.text), _aware(after), _aware(until)
    floor = _wall(after, tz).date() - 2 * _ONE_DAY
    chunks: list[list[datetime]] = []
    found = 0
    for day, offset in _days_backward(spec, tz, _wall(until, tz).date() + 2 * _ONE_DAY):
        if found >= limit or day < floor:
            break
        chunk = [f for f in _day_fires(spec, tz, day, offset) if after < f <= until]
        chunks.append(chunk)
        found += len(chunk)
    newest = [fire for chunk in reversed(chunks) for fire in chunk]
    return newest[-limit:] if limit > 0 else []


def count_fires(
    expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime, cap: int | None = None
) -> int:
    """How many fires fall in ``(after, until]``, without listing them one by one; with
    ``cap``, counting stops once the count passes it (a long range of a frequent schedule
    costs a walk over every day)."""
    spec, after, until = compile_spec(expr.text), _aware(after), _aware(until)
    last_day = _wall(until, tz).date() + 2 * _ONE_DAY
    per_day = len(spec.minutes) * len(spec.hours)
    total = 0
    for day, offset in _days_forward(spec, tz, _wall(after, tz).date() - 2 * _ONE_DAY):
        if day > last_day:
            break
        if (
            offset is not None
            and after < _midnight(day, offset)
            and (_midnight(day + _ONE_DAY, offset) <= until)
        ):
            total += per_day  # a whole ordinary day inside the range
        else:
            total += sum(1 for f in _day_fires(spec, tz, day, offset) if after < f <= until)
        if cap is not None and total > cap:
            break
    return total


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"expected an aware datetime, got {moment!r}")
    return moment.astimezone(UTC)


def _wall(moment: datetime, tz: ZoneInfo) -> datetime:
    return moment.astimezone(tz).replace(tzinfo=None)


def _iter_fires(spec: CronSpec, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    floor = _wall(after, tz)
    for day, offset in _days_forward(spec, tz, floor.date() - 2 * _ONE_DAY):
        if offset is not None and _midnight(day + _ONE_DAY, offset) <= after:
            continue  # an ordinary day wholly before ``after``
        for fire in _day_fires(spec, tz, day, offset, floor):
            if fire > after:
                yield fire


# -- days ------------------------------------------------------------------------------------
# Each day owns the instants from its first wall-clock midnight to the next one. On an ordinary
# day (no offset change near it) its fires are its matching wall times minus a fixed offset. A
# day with an offset change is worked out exactly, from the wall times of it and of both its
# neighbours, because a skipped or repeated hour can move a fire across midnight.

_Day = tuple[date, timedelta | None]  # (day, its UTC offset when it is an ordinary day)


def _days_forward(spec: CronSpec, tz: ZoneInfo, start: date) -> Iterator[_Day]:
    """Days that may hold fires, ascending from ``start``: matching days, and the day after
    each when that day has an offset change (a fire may spill into it)."""
    last = date.min
    for day in _matching_days(spec, start, forward=True):
        for candidate in (day, day + _ONE_DAY):
            offset = _ordinary_offset(tz, candidate)
            if candidate > last and (candidate == day or offset is None):
                yield candidate, offset
                last = candidate


def _days_backward(spec: CronSpec, tz: ZoneInfo, start: date) -> Iterator[_Day]:
    last = date.max
    for day in _matching_days(spec, start, forward=False):
        for candidate in (day + _ONE_DAY, day):
            offset = _ordinary_offset(tz, candidate)
            if candidate < last and (candidate == day or offset is None):
                yield candidate, offset
                last = candidate


def _matching_days(spec: CronSpec, start: date, *, forward: bool) -> Iterator[date]:
    """Days the expression selects, from ``start`` (inclusive) on, merged over its parts."""
    if not forward:
        start = min(start, _LAST_DAY)
    if spec.every_day_of is not None:
        # Plain date arithmetic: croniter would cost a search per day for no information.
        yield from _days_of_months(spec.every_day_of, start, forward)
        return
    streams = [_croniter_days(text, start, forward) for text in spec.day_exprs]
    merged = heapq.merge(*streams, reverse=not forward)
    previous = None
    for day in merged:
        if day != previous:
            yield day
            previous = day


def _days_of_months(months: frozenset[int], start: date, forward: bool) -> Iterator[date]:
    day, step = start, _ONE_DAY if forward else -_ONE_DAY
    while date(1, 1, 8) < day < _LAST_DAY:
        if day.month in months:
            yield day
            day += step
        elif forward:
            day = (day.replace(day=1) + timedelta(days=32)).replace(day=1)
        else:
            day = day.replace(day=1) - _ONE_DAY


def _croniter_days(text: str, start: date, forward: bool) -> Iterator[date]:
    midnight = datetime.combine(start, time())
    # croniter searches strictly after (before) its base, and at most ~50 years ahead.
    base = midnight - timedelta(minutes=1) if forward else midnight + timedelta(minutes=1)
    days = croniter(text, base, day_or=False)
    while True:
        try:
            moment = days.get_next(datetime) if forward else days.get_prev(datetime)
        except (ValueError, OverflowError):  # CroniterBadDateError: no such day any more
            return
        if moment.date() >= _LAST_DAY:
            return
        yield moment.date()


def _matches(spec: CronSpec, day: date) -> bool:
    if spec.every_day_of is not None:
        return day.month in spec.every_day_of
    midnight = datetime.combine(day, time())
    return any(croniter.match(text, midnight, day_or=False) for text in spec.day_exprs)


@lru_cache(maxsize=4096)
def _ordinary_offset(tz: ZoneInfo, day: date) -> timedelta | None:
    """The day's UTC offset if it does not change within six hours of the day, else None."""
    offset = tz.utcoffset(datetime.combine(day, time(12)))
    assert offset is not None  # a ZoneInfo always has an offset
    start = datetime.combine(day, time(), tzinfo=UTC) - offset
    for hours in range(-6, 31, 6):
        if (start + timedelta(hours=hours)).astimezone(tz).utcoffset() != offset:
            return None
    return offset


def _midnight(day: date, offset: timedelta) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC) - offset


def _day_fires(
    spec: CronSpec, tz: ZoneInfo, day: date, offset: timedelta | None, floor: datetime | None = None
) -> Iterable[datetime]:
    """The day's fires in UTC, ascending; lazy on an ordinary day, where ``floor`` (a wall
    time) also skips the hours before it."""
    if offset is None:
        return _changing_day_fires(spec, tz, day)
    skip = floor.hour if floor is not None and floor.date() == day else -1
    return (
        datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC) - offset
        for hour in spec.hours
        if hour >= skip
        for minute in spec.minutes
    )


def _changing_day_fires(spec: CronSpec, tz: ZoneInfo, day: date) -> list[datetime]:
    low, high = _resolve(_at(day), tz), _resolve(_at(day + _ONE_DAY), tz)
    if not spec.wall_clock:
        return _elapsed_fires(spec, tz, low, high)
    walls = _walls(spec, _at(day - _ONE_DAY), _at(day + 2 * _ONE_DAY))
    return sorted({f for f in map(lambda wall: _resolve(wall, tz), walls) if low <= f < high})


def _elapsed_fires(spec: CronSpec, tz: ZoneInfo, low: datetime, high: datetime) -> list[datetime]:
    """Real-time fires in ``[low, high)``: every instant whose wall clock matches, found one
    stretch of constant UTC offset at a time."""
    found: list[datetime] = []
    while low < high:
        offset = low.astimezone(tz).utcoffset()
        assert offset is not None
        end = _offset_change(tz, low, high)
        wall_low, wall_high = (
            (low + offset).replace(tzinfo=None),
            (end + offset).replace(tzinfo=None),
        )
        found += [(w - offset).replace(tzinfo=UTC) for w in _walls(spec, wall_low, wall_high)]
        low = end
    return found


def _walls(spec: CronSpec, low: datetime, high: datetime) -> Iterator[datetime]:
    """Matching wall times in ``[low, high)``, ascending."""
    day = low.date()
    while day <= high.date():
        if _matches(spec, day):
            for hour in spec.hours:
                for minute in spec.minutes:
                    wall = datetime.combine(day, time(hour, minute))
                    if low <= wall < high:
                        yield wall
        day += _ONE_DAY


def _offset_change(tz: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The first instant in ``(low, high]`` with another UTC offset than ``low``, else high."""
    offset = low.astimezone(tz).utcoffset()
    probe = low
    while probe < high:
        step = min(probe + timedelta(hours=1), high)
        if step.astimezone(tz).utcoffset() != offset:
            return _transition(probe, step, tz)
        probe = step
    return high


def _at(day: date) -> datetime:
    return datetime.combine(day, time())


# -- wall time to instants -------------------------------------------------------------------


def _exists(local: datetime, tz: ZoneInfo) -> bool:
    # Through UTC: astimezone() to the datetime's own zone would return it unchanged.
    return _wall(local.astimezone(UTC), tz) == local.replace(tzinfo=None, fold=0)


def _resolve(wall: datetime, tz: ZoneInfo) -> datetime:
    """When a wall-time fire happens: its first occurrence, or, for a wall time skipped by a
    spring-forward gap, the first whole minute after the gap."""
    first = wall.replace(tzinfo=tz, fold=0)
    if _exists(first, tz):
        return first.astimezone(UTC)
    jump = _transition(wall.replace(tzinfo=tz, fold=1).astimezone(UTC), first.astimezone(UTC), tz)
    after_gap = _wall(jump, tz)
    if after_gap.second or after_gap.microsecond:  # historical offsets with seconds
        after_gap = after_gap.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return _resolve(after_gap, tz)


def _transition(before: datetime, after: datetime, tz: ZoneInfo) -> datetime:
    """The instant in ``(before, after]`` at which the zone's offset changes (bisection)."""
    old = before.astimezone(tz).utcoffset()
    low, high = before, after
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if middle.astimezone(tz).utcoffset() == old:
            low = middle
        else:
            high = middle
    return high
