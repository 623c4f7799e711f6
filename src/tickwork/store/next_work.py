"""``Store.next_work``: what a scheduler pass reads first, in one statement.

A pass used to read six times whatever there was to do (the cron fires due, the running
backfills, the task runs due now and those to hand out ahead, then the next fire and the next
due time to sleep on), each a thread hop and a round trip, and the two due-time reads were
planned afresh every time: 15-20 ms of PostgreSQL's CPU apiece (a union of gated subqueries
over every partition), 30 ms a second for a scheduler with nothing to do. This statement
answers all of it at once; the pass then reads only what is due. On PostgreSQL it runs on
the event loop, planned once per connection (``Dialect.read_planned``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from tickwork.core.backfill import BackfillState
from tickwork.ports import NextWork
from tickwork.store.dispatch import DISPATCHABLE_STATES, earliest_due
from tickwork.store.jobs import NEXT_FIRE
from tickwork.store.schema import backfills, task_runs

_AFTER = sa.bindparam("after", type_=task_runs.c.due_at.type)


@functools.cache
def statement() -> sa.Select[Any]:
    """One row: the next fire, the earliest due time per dispatchable state, the earliest
    after ``after`` per state of what the window hands out ahead, and whether a backfill
    runs."""
    running = sa.exists().where(backfills.c.state == BackfillState.RUNNING.value)
    return sa.select(
        NEXT_FIRE.scalar_subquery(),
        *(earliest_due(state) for state in DISPATCHABLE_STATES),
        *(earliest_due(state, after=_AFTER) for state in DISPATCHABLE_STATES),
        running,
    )


def of_row(row: Sequence[Any]) -> NextWork:
    """The statement's row as a ``NextWork`` (timestamps in UTC, whatever the driver's zone)."""
    n = len(DISPATCHABLE_STATES)
    return NextWork(
        fire_at=_utc(row[0]),
        due_at=_earliest(row[1 : 1 + n]),
        ahead_at=_earliest(row[1 + n : 1 + 2 * n]),
        backfilling=bool(row[-1]),
    )


def _earliest(values: Sequence[datetime | None]) -> datetime | None:
    return min((_in_utc(v) for v in values if v is not None), default=None)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else _in_utc(value)


def _in_utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)
