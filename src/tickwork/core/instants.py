"""The instants tickwork accepts: aware, and far enough from the ends of ``datetime``.

``9999-12-31T23:59:59-05:00`` is a valid ISO 8601 instant whose UTC form does not fit in a
``datetime`` (OverflowError on ``astimezone``), and an instant near either end overflows as
soon as anything adds a delay or a cron step to it. So every instant a user gives (schedule
``at``/``start``/``end``, a preview's ``from``, run filters, a trigger's logical date, an
enqueue ``at``) must lie between years 1000 and 9000, in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime

#: The earliest and (exclusive) latest instants accepted.
MIN_INSTANT = datetime(1000, 1, 1, tzinfo=UTC)
MAX_INSTANT = datetime(9000, 1, 1, tzinfo=UTC)
RANGE_TEXT = "must lie between the years 1000 and 9000 (UTC)"


def in_range(value: datetime) -> bool:
    """Whether ``value`` (aware, or naive read as UTC) lies in the accepted range."""
    if value.utcoffset() is None:
        value = value.replace(tzinfo=UTC)
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):  # beyond datetime's own range once in UTC
        return False
    return MIN_INSTANT <= utc < MAX_INSTANT
