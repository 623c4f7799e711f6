"""Jitter: spreading cron fires of one instant over a window, the same way every time.

A fire keeps its logical date (what data the run is for, its key, its identity); only the
instant its run becomes due moves: ``due = fire + offset``, the offset taken from a hash of
(job name, logical date) in ``[0, min(jitter, next fire - fire))``. So:

- the same fire always gets the same instant, whichever scheduler plans it, before and after
  a failover, and in ``tickwork schedule preview``;
- a fire is never due at or after the next one, so ticks are never reordered, and since the
  run is still keyed by its logical date none is doubled or lost;
- a job's ``jitter`` (seconds) is its own window; a job without one (None) takes the fleet's
  ``cron_spread`` (a scheduler setting), and a job with ``jitter = 0`` is never moved.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime, timedelta

from tickwork.core.errors import ValidationError

#: The longest jitter accepted, in seconds (a week): a fire is bounded by the next anyway.
MAX_JITTER = 7 * 24 * 3600.0

_US = 1_000_000


def check_jitter(value: object, field: str = "jitter") -> float | None:
    """``value`` as seconds of jitter (None: not set); a ValidationError naming ``field``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(field, "must be a number of seconds, such as 300")
    if not 0 <= value <= MAX_JITTER:
        raise ValidationError(
            field, f"must be from 0 to {MAX_JITTER:.0f} seconds (a week), not {value:g}"
        )
    return float(value)


def effective_jitter(jitter: float | None, spread: float) -> float:
    """The window a job's fires are spread over: its own ``jitter``, else the fleet's."""
    return spread if jitter is None else jitter


def offset(
    job_name: str, logical_date: datetime, jitter: float, next_fire: datetime | None
) -> timedelta:
    """How long after ``logical_date`` its run is due: in ``[0, jitter)`` and, with a
    ``next_fire``, strictly less than the time to it. Whole microseconds, from a hash."""
    bound = int(jitter * _US)
    if next_fire is not None:
        bound = min(bound, _micros(next_fire - logical_date))
    if bound <= 0:
        return timedelta(0)
    key = f"{job_name}\0{_utc_text(logical_date)}".encode()
    drawn = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    return timedelta(microseconds=(drawn * bound) >> 64)


def due_at(
    job_name: str, logical_date: datetime, jitter: float, next_fire: datetime | None
) -> datetime:
    """The instant the fire at ``logical_date`` is due (see ``offset``)."""
    return logical_date + offset(job_name, logical_date, jitter, next_fire)


def spread_fires(
    job_name: str, fires: list[datetime], jitter: float, following: datetime | None
) -> list[datetime]:
    """The due instants of consecutive ``fires``; ``following`` is the fire after the last
    (None: the schedule ends there)."""
    nexts = [*fires[1:], following]
    return [due_at(job_name, f, jitter, n) for f, n in zip(fires, nexts, strict=True)]


def _micros(span: timedelta) -> int:
    return (span.days * 86_400 + span.seconds) * _US + span.microseconds


def _utc_text(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat()
