"""``Store.maintain_partitions``: monthly partitions ahead and retention of the run history.

Each step is its own transaction: creating the months ahead, then dropping each old month
(PostgreSQL), or deleting old runs a batch at a time (SQLite), so no step holds locks long.
On PostgreSQL every step first takes one advisory lock, so two processes maintaining at once
(a leader and a stale one, or ``tickwork db upgrade`` racing a leader) take turns; every step
re-reads what exists and re-checks what it drops under that lock, so repeating one is
harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.engine import Connection

from tickwork.ports import Maintenance
from tickwork.store import partitions

T = TypeVar("T")
log = logging.getLogger("tickwork.store.retention")

#: Serializes partition maintenance across processes on PostgreSQL.
_PG_MAINTENANCE_LOCK = 0x7469636C  # "ticl"


def _locked(work: Callable[[Connection], T]) -> Callable[[Connection], T]:
    def locked(conn: Connection) -> T:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MAINTENANCE_LOCK})")
        return work(conn)

    return locked


class SqlHistoryMethods:
    """``maintain_partitions`` of ``SqlStore`` (see the ``Store`` port)."""

    if TYPE_CHECKING:

        @property
        def dialect(self) -> str: ...
        async def _write(self, work: Callable[[Connection], T]) -> T: ...

    async def maintain_partitions(
        self, now: datetime, *, retention_days: int | None = None, ahead: int = 2
    ) -> Maintenance:
        if retention_days is not None and retention_days < 1:
            raise ValueError(f"retention_days must be at least 1 (or None), not {retention_days}")
        if ahead < 0:
            raise ValueError(f"ahead must not be negative, not {ahead}")
        if self.dialect != "postgresql":
            deleted = 0
            if retention_days is not None:
                deleted = await self._delete_old_runs(now - timedelta(days=retention_days))
            return Maintenance(deleted_runs=deleted)
        first = partitions.month_start(now)
        months = [partitions.add_months(first, i) for i in range(ahead + 1)]
        done = Maintenance(
            created=await self._write(_locked(lambda conn: partitions.create_months(conn, months)))
        )
        if retention_days is None:
            return done
        old = await self._write(
            _locked(lambda conn: partitions.droppable_months(conn, now, retention_days))
        )
        for month in old:
            result = await self._write(_locked(partial(partitions.drop_month, month=month)))
            label = f"{month:%Y-%m}"
            if result.reason is None:
                done.dropped.extend(
                    partitions.partition_name(t, month) for t in partitions.PARTITIONED
                )
            else:
                done.kept.append(f"{label}: {result.reason}")
        return done

    async def _delete_old_runs(self, before: datetime) -> int:
        deleted = 0
        while True:
            batch = await self._write(
                lambda conn: partitions.delete_old_runs(conn, before, partitions.RETENTION_BATCH)
            )
            deleted += batch
            if batch < partitions.RETENTION_BATCH:
                return deleted
