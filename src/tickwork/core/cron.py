"""Cron expressions evaluated in an IANA zone, with Debian cron's daylight-saving rules.

The rules (the ones cronsim implements, see ``reference/ecosystem.md`` c.1):

- an expression whose minute **and** hour fields are specific (neither starts with ``*``) is
  evaluated in wall time: a wall time that does not exist (spring forward) fires once at the first
  valid minute after it, and a repeated wall time (fall back) fires once, at its first occurrence;
- an expression whose minute or hour field starts with ``*`` (``*``, ``*/15``) follows real elapsed
  time: it fires at every real instant whose wall clock matches, so ``0 * * * *`` fires at both
  01:00s of a fall-back night and ``*/15 * * * *`` every 15 real minutes.

croniter finds the calendar days an expression selects. This module owns everything else: the
grammar (so croniter's extensions and quirks such as ``5-5`` meaning "every minute" never leak
in), the times of day, and the daylight-saving rules above, which croniter does not follow (it
fires a repeated 01:30 twice). Fires are computed a day at a time: on a day without an offset
change they are plain arithmetic, which keeps planning over long outages cheap.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import islice, takewhile
from zoneinfo import ZoneInfo, available_timezones

from croniter import croniter

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

FIELD = "schedule.cron"
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_NUMBER = re.compile(r"[0-9]{1,4}")
_ONE_DAY = timedelta(days=1)
_LAST_DAY = date(9999, 12, 1)  # stop well before datetime's range ends


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed cron expression; ``text`` is its normalized five-field form."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0

    def value(self, token: str) -> int:
        if token in self.names:
            return self.names.index(token) + self.name_base
        if not _NUMBER.fullmatch(token):
            raise _bad(f"{self.name} value {token!r} is not a number{self._named()}")
        number = int(token)
        if not self.low <= number <= self.high:
            raise _bad(f"{self.name} value {number} is out of range; use {self.low}-{self.high}")
        return number

    def _named(self) -> str:
        return (
            f"; use {self.low}-{self.high} or {self.names[0]}-{self.names[-1]}"
            if self.names
            else (f"; use {self.low}-{self.high}")
        )


_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, _MONTHS, 1)
_DOW = _Field("day-of-week", 0, 7, _DAYS, 0)


@dataclass(frozen=True, slots=True)
class _Spec:
    """What an expression selects: times of day, and croniter expressions for the days."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    wall_clock: bool  # specific minute and hour: evaluated in wall time
    day_exprs: tuple[str, ...]  # union of croniter "0 0 dom month dow" expressions (AND rule)
    every_day_of: frozenset[int] | None  # months, when the day fields select every day of them


def _bad(reason: str) -> ValidationError:
    return ValidationError(FIELD, reason)


# -- parsing ---------------------------------------------------------------------------------


def parse(expr: str) -> CronExpr:
    """Parse a five-field cron expression or an alias such as ``@daily``.

    Fields: minute hour day-of-month month day-of-week, each a ``*``, a value, a range ``a-b``,
    a step ``*/n``, ``a/n`` or ``a-b/n``, or a comma list of those; month and weekday names
    (``JAN``, ``MON``); ``L`` (last day) in day-of-month; ``MON#2`` (second Monday) and ``5L``
    (last Friday) in day-of-week. Raises ``ValidationError("schedule.cron", ...)`` otherwise.
    """
    if not isinstance(expr, str):
        raise _bad("a cron expression must be a string such as '30 2 * * *'")
    text = " ".join(expr.split()).upper()
    text = ALIASES.get(text.lower(), text)
    _compile(text)
    return CronExpr(text)


@lru_cache(maxsize=1024)
def _compile(text: str) -> _Spec:
    fields = text.split()
    if len(fields) != 5:
        raise _bad(
            f"expected 5 fields (minute hour day-of-month month day-of-week) or one of "
            f"{', '.join(ALIASES)}, got {len(fields)} field(s)"
        )
    minute, hour, dom, month, dow = fields
    days = _day_exprs(dom, month, dow)
    every_day = all(expr.startswith("0 0 * ") and expr.endswith(" *") for expr in days)
    return _Spec(
        minutes=tuple(sorted(_values(_MINUTE, minute))),
        hours=tuple(sorted(_values(_HOUR, hour))),
        wall_clock=not minute.startswith("*") and not hour.startswith("*"),
        day_exprs=days,
        every_day_of=frozenset(_values(_MONTH, month)) if every_day else None,
    )


def _values(field: _Field, text: str) -> set[int]:
    values: set[int] = set()
    for term in text.split(","):
        values |= _term(field, term)
    return values


def _term(field: _Field, term: str) -> set[int]:
    base, slash, step_text = term.partition("/")
    step = 1
    if slash:
        if not _NUMBER.fullmatch(step_text) or int(step_text) == 0:
            raise _bad(f"{field.name} step in {term!r} must be a whole number of 1 or more")
        step = int(step_text)
    if base == "*":
        low, high = field.low, field.high
    elif "-" in base:
        start, _, end = base.partition("-")
        low, high = field.value(start), field.value(end)
        if high < low:
            raise _bad(f"{field.name} range {term!r} runs backwards; write it low-high")
    elif base:
        low = field.value(base)
        high = field.high if slash else low
    else:
        raise _bad(f"empty {field.name} term in {term!r}; use a value, range, step or '*'")
    return set(range(low, high + 1, step))


def _dom(text: str) -> str:
    """croniter's form of the day-of-month field (``*`` when every day is selected)."""
    terms = text.split(",")
    last = "L" in terms
    values = _values(_DOM, ",".join(t for t in terms if t != "L")) if len(terms) > last else set()
    if not last and values == set(range(1, 32)):
        return "*"
    return ",".join([*map(str, sorted(values)), *(["L"] if last else [])])


def _dow(text: str) -> list[str]:
    """croniter's form of the weekday field, as groups croniter accepts (it cannot mix ``#``
    or last-weekday terms with plain weekdays in one field)."""
    plain: set[int] = set()
    special: list[str] = []
    for term in text.split(","):
        if "#" in term:
            day, _, nth = term.partition("#")
            if not _NUMBER.fullmatch(nth) or not 1 <= int(nth) <= 5:
                raise _bad(f"day-of-week {term!r}: the week after '#' must be 1-5")
            special.append(f"{_DOW.value(day) % 7}#{int(nth)}")
        elif term.endswith("L") and len(term) > 1:
            special.append(f"L{_DOW.value(term[:-1]) % 7}")
        else:
            plain |= {v % 7 for v in _term(_DOW, term)}
    groups = (
        ["*"] if plain == set(range(7)) else [",".join(map(str, sorted(plain)))] if plain else []
    )
    return groups + ([",".join(special)] if special else [])


def _day_exprs(dom: str, month: str, dow: str) -> tuple[str, ...]:
    """The days as a union of croniter expressions, each read with day_or=False.

    As in Debian cron (and cronsim), day-of-month and day-of-week must both match when either
    field starts with ``*``; otherwise a day matching either one is selected.
    """
    months = _values(_MONTH, month)
    mon = "*" if months == set(range(1, 13)) else ",".join(map(str, sorted(months)))
    dom_part, dow_parts = _dom(dom), _dow(dow)
    if dom.startswith("*") or dow.startswith("*"):
        return tuple(f"0 0 {dom_part} {mon} {part}" for part in dow_parts)
    return (f"0 0 {dom_part} {mon} *", *(f"0 0 * {mon} {part}" for part in dow_parts))


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
    when = (
        f"at {int(hour):02d}:{int(minute):02d}"
        if minute.isdigit() and hour.isdigit()
        else (f"at minute {minute} of hour {hour}")
    )
    days = [f"day-of-month {dom}"] if dom != "*" else []
    days += [f"month {month}"] if month != "*" else []
    days += [f"day-of-week {dow}"] if dow != "*" else []
    return when + (" on " + ", ".join(days) if days else " every day")


# -- fires -----------------------------------------------------------------------------------


def next_fire(expr: CronExpr, tz: ZoneInfo, after: datetime) -> datetime | None:
    """The first fire strictly after ``after`` (aware), in UTC; None if the expression never
    fires again (``0 0 30 2 *``)."""
    return next(_iter_fires(_compile(expr.text), tz, _aware(after)), None)


def fires(
    expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """Fires in ``(after, until]``, oldest first, at most ``limit`` of them, in UTC."""
    until = _aware(until)
    found = _iter_fires(_compile(expr.text), tz, _aware(after))
    return list(islice(takewhile(lambda fire: fire <= until, found), max(limit, 0)))


def latest_fires(
    expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """The newest ``limit`` fires in ``(after, until]``, oldest first, in UTC.

    Walks back from ``until`` a day at a time, so the cost follows ``limit``, not the length
    of the range.
    """
    spec, after, until = _compile(expr.text), _aware(after), _aware(until)
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


def count_fires(expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime) -> int:
    """How many fires fall in ``(after, until]``, without listing them one by one."""
    spec, after, until = _compile(expr.text), _aware(after), _aware(until)
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
    return total


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"expected an aware datetime, got {moment!r}")
    return moment.astimezone(UTC)


def _wall(moment: datetime, tz: ZoneInfo) -> datetime:
    return moment.astimezone(tz).replace(tzinfo=None)


def _iter_fires(spec: _Spec, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    floor = _wall(after, tz)
    for day, offset in _days_forward(spec, tz, floor.date() - 2 * _ONE_DAY):
        for fire in _day_fires(spec, tz, day, offset, floor):
            if fire > after:
                yield fire


# -- days ------------------------------------------------------------------------------------
# Each day owns the instants from its first wall-clock midnight to the next one. On an ordinary
# day (no offset change near it) its fires are its matching wall times minus a fixed offset. A
# day with an offset change is worked out exactly, from the wall times of it and of both its
# neighbours, because a skipped or repeated hour can move a fire across midnight.

_Day = tuple[date, timedelta | None]  # (day, its UTC offset when it is an ordinary day)


def _days_forward(spec: _Spec, tz: ZoneInfo, start: date) -> Iterator[_Day]:
    """Days that may hold fires, ascending from ``start``: matching days, and the day after
    each when that day has an offset change (a fire may spill into it)."""
    last = date.min
    for day in _matching_days(spec, start, forward=True):
        for candidate in (day, day + _ONE_DAY):
            offset = _ordinary_offset(tz, candidate)
            if candidate > last and (candidate == day or offset is None):
                yield candidate, offset
                last = candidate


def _days_backward(spec: _Spec, tz: ZoneInfo, start: date) -> Iterator[_Day]:
    last = date.max
    for day in _matching_days(spec, start, forward=False):
        for candidate in (day + _ONE_DAY, day):
            offset = _ordinary_offset(tz, candidate)
            if candidate < last and (candidate == day or offset is None):
                yield candidate, offset
                last = candidate


def _matching_days(spec: _Spec, start: date, *, forward: bool) -> Iterator[date]:
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


def _matches(spec: _Spec, day: date) -> bool:
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
    spec: _Spec, tz: ZoneInfo, day: date, offset: timedelta | None, floor: datetime | None = None
) -> list[datetime]:
    """The day's fires in UTC, ascending; ``floor`` (a wall time) lets an ordinary day skip
    the hours before it."""
    if offset is not None:
        skip = floor.hour if floor is not None and floor.date() == day else -1
        return [
            datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC) - offset
            for hour in spec.hours
            if hour >= skip
            for minute in spec.minutes
        ]
    return _changing_day_fires(spec, tz, day)


def _changing_day_fires(spec: _Spec, tz: ZoneInfo, day: date) -> list[datetime]:
    low, high = _resolve(_at(day), tz), _resolve(_at(day + _ONE_DAY), tz)
    if not spec.wall_clock:
        return _elapsed_fires(spec, tz, low, high)
    walls = _walls(spec, _at(day - _ONE_DAY), _at(day + 2 * _ONE_DAY))
    return sorted({f for f in map(lambda wall: _resolve(wall, tz), walls) if low <= f < high})


def _elapsed_fires(spec: _Spec, tz: ZoneInfo, low: datetime, high: datetime) -> list[datetime]:
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


def _walls(spec: _Spec, low: datetime, high: datetime) -> Iterator[datetime]:
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
