"""The ``Store`` port's leases, logs, history (partitions and retention), fences and
backfills: what the scheduler's housekeeping and the backfill runner use, beside the hot path
of jobs, runs and dispatch (``SqlStore``). Each method is one query-module call in one
transaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from tickwork.core.backfill import Backfill, BackfillState
from tickwork.core.model import LogChunk, RunState, TaskRun
from tickwork.ports import Fence, Lease, Maintenance
from tickwork.ports.backfills import BackfillCounts, BackfillDate, BackfillStepWrite, OpenDate
from tickwork.store import alerts, backfills, fences, leases, logs
from tickwork.store.sql_views import SqlViews


class SqlUpkeep(SqlViews):
    """Leases, logs, history and backfills (see ``SqlStore``)."""

    # -- leases ----------------------------------------------------------------------------
    async def acquire_lease(self, name: str, holder: str, ttl: float) -> Lease | None:
        return await self._write(lambda conn: leases.acquire(conn, self._d, name, holder, ttl))

    async def renew_lease(self, name: str, holder: str, token: int, ttl: float) -> Lease | None:
        return await self._write(
            lambda conn: leases.renew(conn, self._d, name, holder, token, ttl=ttl)
        )

    async def release_lease(self, name: str, holder: str, token: int) -> bool:
        return await self._write(lambda conn: leases.release(conn, self._d, name, holder, token))

    async def get_lease(self, name: str) -> Lease | None:
        return await self._read(lambda conn: leases.get(conn, name))

    # -- logs ------------------------------------------------------------------------------
    async def append_logs(self, chunks: Sequence[LogChunk]) -> None:
        if not chunks:
            return
        await self._write(lambda conn: logs.append_logs(conn, self._d, chunks))

    async def read_logs(
        self, task_run_id: str, *, after_seq: int = -1, limit: int = 1000
    ) -> list[LogChunk]:
        return await self._read(lambda conn: logs.read_logs(conn, task_run_id, after_seq, limit))

    # -- history ---------------------------------------------------------------------------
    async def maintain_partitions(
        self, now: datetime, *, retention_days: int | None = None, ahead: int = 2
    ) -> Maintenance:
        if retention_days is not None and retention_days < 1:
            raise ValueError(f"retention_days must be at least 1 (or None), not {retention_days}")
        if ahead < 0:
            raise ValueError(f"ahead must not be negative, not {ahead}")
        done = await self._d.maintain(self._write, now, retention_days, ahead)
        if retention_days is not None:  # the alerts of the history retention dropped
            before = now - timedelta(days=retention_days)
            pruned: int = await self._write(lambda c: alerts.prune_alerts(c, before))
            done = dataclasses.replace(done, deleted_alerts=pruned)
        return done

    # -- fences and backfills --------------------------------------------------------------
    async def check_fence(self, fence: Fence) -> None:
        await self._write(lambda conn: fences.hold(conn, self._d, fence))

    async def create_backfill(self, backfill: Backfill) -> None:
        await self._write(lambda conn: backfills.create_backfill(conn, backfill))

    async def get_backfill(self, backfill_id: str) -> Backfill | None:
        return await self._read(lambda conn: backfills.get_backfill(conn, backfill_id))

    async def list_backfills(self, *, job_id: str | None = None, limit: int = 50) -> list[Backfill]:
        return await self._read(lambda conn: backfills.list_backfills(conn, job_id, limit))

    async def running_backfills(self, limit: int) -> list[Backfill]:
        return await self._read(lambda conn: backfills.running_backfills(conn, limit))

    async def open_dates(self, backfill_id: str) -> list[OpenDate]:
        return await self._read(lambda conn: backfills.open_dates(conn, backfill_id))

    async def runs_for_dates(
        self, job_id: str, dates: Sequence[datetime]
    ) -> dict[datetime, tuple[str, RunState]]:
        return await self._read(lambda conn: backfills.runs_for_dates(conn, job_id, dates))

    async def step_backfill(self, step: BackfillStepWrite, *, fence: Fence | None = None) -> bool:
        return await self._write(
            self._fenced(fence, lambda conn: backfills.step_backfill(conn, self._d, step))
        )

    async def set_backfill_state(
        self,
        backfill_id: str,
        expected: frozenset[BackfillState],
        state: BackfillState,
        now: datetime,
        reason: str | None = None,
    ) -> bool:
        return await self._write(
            lambda conn: backfills.set_state(conn, backfill_id, expected, state, now, reason=reason)
        )

    async def cancel_backfill(
        self, backfill_id: str, now: datetime, *, kill: bool
    ) -> list[TaskRun]:
        return await self._write(
            lambda conn: backfills.cancel_backfill(conn, backfill_id, now, kill)
        )

    async def backfill_counts(self, backfill_id: str) -> BackfillCounts:
        return await self._read(lambda conn: backfills.backfill_counts(conn, backfill_id))

    async def backfill_dates(
        self, backfill_id: str, *, limit: int = 100, after: datetime | None = None
    ) -> list[BackfillDate]:
        return await self._read(
            lambda conn: backfills.backfill_dates(conn, backfill_id, limit, after)
        )
