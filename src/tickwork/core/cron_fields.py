"""Cron grammar: five fields (or an alias) parsed into the times and days they select.

We own the grammar instead of passing text to croniter, so croniter's extensions (seconds and
year fields, ``H``, ``W``, ``?``) and quirks (``5-5`` read as "every minute", backwards ranges
wrapping around, no mixing of ``MON#2`` with plain weekdays) never reach a schedule. The ranges
and steps follow Debian cron and cronsim: ``a/n`` runs from a to the end of the field, and
day-of-week 7 is Sunday.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from tickwork.core.errors import ValidationError

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
        names = f" or {self.names[0]}-{self.names[-1]}" if self.names else ""
        return f"; use {self.low}-{self.high}{names}"


_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, _MONTHS, 1)
_DOW = _Field("day-of-week", 0, 7, _DAYS, 0)


@dataclass(frozen=True, slots=True)
class CronSpec:
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
    compile_spec(text)
    return CronExpr(text)


@lru_cache(maxsize=1024)
def compile_spec(text: str) -> CronSpec:
    """What a normalized expression selects (cached: the scheduler asks for the same few)."""
    fields = text.split()
    if len(fields) != 5:
        raise _bad(
            f"expected 5 fields (minute hour day-of-month month day-of-week) or one of "
            f"{', '.join(ALIASES)}, got {len(fields)} field(s)"
        )
    minute, hour, dom, month, dow = fields
    days = _day_exprs(dom, month, dow)
    every_day = all(expr.startswith("0 0 * ") and expr.endswith(" *") for expr in days)
    return CronSpec(
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
