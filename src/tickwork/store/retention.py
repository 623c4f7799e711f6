"""Partition maintenance on PostgreSQL: monthly partitions ahead and retention of the run
history (``PostgresDialect.maintain``; SQLite deletes old runs in batches instead).

Each step is its own transaction: creating the months ahead, then dropping each old month,
so no step holds locks long. Every step first takes one advisory lock, so two processes
maintaining at once (a leader and a stale one, or ``tickwork db upgrade`` racing a leader)
take turns; every step re-reads what exists and re-checks what it drops under that lock, so
repeating one is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from tickwork.ports import Maintenance
from tickwork.store import partitions
from tickwork.store.dialect import Writer

T = TypeVar("T")
log = logging.getLogger("tickwork.store.retention")

#: Serializes partition maintenance across processes on PostgreSQL.
_PG_MAINTENANCE_LOCK = 0x7469636C  # "ticl"


def _locked(work: Callable[[Connection], T]) -> Callable[[Connection], T]:
    def locked(conn: Connection) -> T:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MAINTENANCE_LOCK})")
        return work(conn)

    return locked


async def maintain_partitions(
    write: Writer[Any], now: datetime, retention_days: int | None, ahead: int
) -> Maintenance:
    first = partitions.month_start(now)
    months = [partitions.add_months(first, i) for i in range(ahead + 1)]
    created: list[str] = await write(_locked(lambda conn: partitions.create_months(conn, months)))
    done = Maintenance(created=created)
    if retention_days is None:
        return done
    old: list[datetime] = await write(
        _locked(lambda conn: partitions.droppable_months(conn, now, retention_days))
    )
    for month in old:
        result: partitions.MonthDrop = await write(
            _locked(partial(partitions.drop_month, month=month))
        )
        if result.reason is None:
            done.dropped.extend(partitions.partition_name(t, month) for t in partitions.PARTITIONED)
        else:
            done.kept.append(f"{month:%Y-%m}: {result.reason}")
    return done
