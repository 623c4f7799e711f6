"""``SqlStore``: the ``Store`` port on SQLite or PostgreSQL (SQLAlchemy Core, asyncio)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from tickwork.core.model import Job, LogChunk, NewRun, Outcome, RunDetail, TaskRun
from tickwork.ports import RunPage, TaskKey
from tickwork.store import dispatch, jobs, logs
from tickwork.store import runs as run_queries
from tickwork.store.common import conflict_from
from tickwork.store.engine import Engines, create_engines
from tickwork.store.migrate import upgrade_head
from tickwork.store.schema import TABLES_CHILDREN_FIRST


async def open_store(url: str) -> SqlStore:
    """A store on ``url`` (``sqlite:///path.db``, ``sqlite://``, ``postgresql://…``).

    Does not migrate: call ``await store.migrate()`` (or ``tickwork db upgrade``) first.
    """
    return SqlStore(create_engines(url))


class SqlStore:
    """The ``tickwork.ports.Store`` on SQLite or PostgreSQL. See the port for each method.

    Writes run in one transaction each; reads see one snapshot. Unique violations become
    ``Conflict`` at this edge. ``cancel_run`` and ``retry_run`` raise ``NotFound`` for an
    unknown run.
    """

    def __init__(self, engines: Engines) -> None:
        self._engines = engines
        # One in-memory connection is shared by every caller, so operations take turns.
        self._turn = asyncio.Lock() if engines.single_connection else None

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._engines.dialect

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        async with self._serialized():
            try:
                async with self._engines.write.begin() as conn:
                    yield conn
            except IntegrityError as exc:
                conflict = conflict_from(exc)
                if conflict is None:
                    raise
                raise conflict from None

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[AsyncConnection]:
        async with self._serialized(), self._engines.read.begin() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _serialized(self) -> AsyncIterator[None]:
        if self._turn is None:
            yield
            return
        async with self._turn:
            yield

    async def migrate(self) -> None:
        async with self._serialized():
            await upgrade_head(self._engines.write)

    async def close(self) -> None:
        await self._engines.dispose()

    async def truncate_all(self) -> None:
        """Delete every row (tests only): a fast reset between tests on one database."""
        async with self._write() as conn:
            if conn.dialect.name == "postgresql":
                names = ", ".join(t.name for t in TABLES_CHILDREN_FIRST)
                await conn.execute(sa.text(f"TRUNCATE {names}"))
                return
            for table in TABLES_CHILDREN_FIRST:
                await conn.execute(table.delete())

    # -- jobs ------------------------------------------------------------------------------
    async def create_jobs(self, items: Sequence[tuple[Job, Sequence[NewRun]]]) -> None:
        async with self._write() as conn:
            await jobs.create_jobs(conn, items)

    async def get_job(self, name: str) -> Job | None:
        async with self._read() as conn:
            return await jobs.get_job(conn, name)

    async def list_jobs(self, *, limit: int = 100, after: str | None = None) -> list[Job]:
        async with self._read() as conn:
            return await jobs.list_jobs(conn, limit, after)

    async def set_paused(self, job_id: str, paused: bool, now: datetime) -> bool:
        async with self._write() as conn:
            return await jobs.set_paused(conn, job_id, paused, now)

    async def delete_job(self, job_id: str, now: datetime) -> list[TaskRun]:
        async with self._write() as conn:
            return await jobs.delete_job(conn, job_id, now)

    async def due_cron_jobs(self, now: datetime, limit: int) -> list[Job]:
        async with self._read() as conn:
            return await jobs.due_cron_jobs(conn, now, limit)

    async def next_fire_at(self) -> datetime | None:
        async with self._read() as conn:
            return await jobs.next_fire_at(conn)

    async def materialize(
        self,
        job_id: str,
        expected_next: datetime,
        new_next: datetime | None,
        runs: Sequence[NewRun],
    ) -> list[TaskRun]:
        async with self._write() as conn:
            return await jobs.materialize(conn, job_id, expected_next, new_next, runs)

    # -- runs ------------------------------------------------------------------------------
    async def create_runs(self, runs: Sequence[NewRun]) -> None:
        async with self._write() as conn:
            await run_queries.insert_runs(conn, runs)

    async def get_run(self, run_id: str) -> RunDetail | None:
        async with self._read() as conn:
            return await run_queries.get_run(conn, run_id)

    async def list_runs(
        self,
        *,
        job_id: str | None = None,
        state: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        async with self._read() as conn:
            return await run_queries.list_runs(conn, job_id, state, limit, cursor)

    async def cancel_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        async with self._write() as conn:
            return await run_queries.cancel_run(conn, run_id, now)

    async def retry_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        async with self._write() as conn:
            return await run_queries.retry_run(conn, run_id, now)

    # -- dispatch and execution ------------------------------------------------------------
    async def due_task_runs(self, until: datetime, limit: int) -> list[TaskRun]:
        async with self._read() as conn:
            return await dispatch.due_task_runs(conn, until, limit)

    async def next_due_at(self) -> datetime | None:
        async with self._read() as conn:
            return await dispatch.next_due_at(conn)

    async def mark_queued(self, keys: Sequence[TaskKey], now: datetime) -> list[TaskRun]:
        if not keys:
            return []
        async with self._write() as conn:
            return await dispatch.mark_queued(conn, keys, now)

    async def queued_task_runs(self, queued_before: datetime, limit: int) -> list[TaskRun]:
        async with self._read() as conn:
            return await dispatch.queued_task_runs(conn, queued_before, limit)

    async def claim(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> list[TaskRun]:
        if not keys:
            return []
        async with self._write() as conn:
            return await dispatch.claim(conn, keys, worker_id, now)

    async def heartbeat(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[str]:
        if not keys:
            return set()
        async with self._write() as conn:
            return await dispatch.heartbeat(conn, keys, worker_id, now)

    async def complete(self, outcomes: Sequence[Outcome]) -> list[str]:
        if not outcomes:
            return []
        async with self._write() as conn:
            return await dispatch.complete(conn, outcomes)

    async def stale_running(self, heartbeat_before: datetime, limit: int) -> list[TaskRun]:
        async with self._read() as conn:
            return await dispatch.stale_running(conn, heartbeat_before, limit)

    async def requeue(self, keys: Sequence[TaskKey], now: datetime) -> int:
        if not keys:
            return 0
        async with self._write() as conn:
            return await dispatch.requeue(conn, keys, now)

    # -- logs ------------------------------------------------------------------------------
    async def append_logs(self, chunks: Sequence[LogChunk]) -> None:
        if not chunks:
            return
        async with self._write() as conn:
            await logs.append_logs(conn, chunks)

    async def read_logs(
        self, task_run_id: str, *, after_seq: int = -1, limit: int = 1000
    ) -> list[LogChunk]:
        async with self._read() as conn:
            return await logs.read_logs(conn, task_run_id, after_seq, limit)
