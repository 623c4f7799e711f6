"""``SqlStore``: the ``Store`` port on SQLite or PostgreSQL (SQLAlchemy Core).

Each operation is one transaction, run on a store thread (see ``engine.py`` for why).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import Job, LogChunk, NewRun, Outcome, RunDetail, TaskRun, TaskRunState
from tickwork.ports import (
    Completion,
    DeadLetterPage,
    Fence,
    JobFilter,
    KeyReceipt,
    Lease,
    Materialization,
    RunCopy,
    RunPage,
    TaskKey,
    TimeWindow,
)
from tickwork.store import dispatch, fences, jobs, leases, logs, migrate, pg_dispatch
from tickwork.store import runs as run_queries
from tickwork.store.backfills import SqlBackfillMethods
from tickwork.store.common import conflict_from
from tickwork.store.dashboard_reads import SqlDashboardReads
from tickwork.store.engine import Engines, create_engines
from tickwork.store.facts import SqlFactsMethods
from tickwork.store.fences import SqlFenceMethods
from tickwork.store.idempotency import SqlIdempotencyMethods, keyed
from tickwork.store.pg_direct import DirectWriter
from tickwork.store.pg_enqueue import enqueue_direct
from tickwork.store.pools import SqlPoolMethods
from tickwork.store.retention import SqlHistoryMethods
from tickwork.store.schema import TABLES_CHILDREN_FIRST, on_dialect
from tickwork.store.tokens import SqlTokenMethods
from tickwork.store.web import SqlWebMethods
from tickwork.store.why import SqlWhyMethods
from tickwork.store.workers import SqlWorkerMethods

T = TypeVar("T")


def _utcnow() -> datetime:
    return datetime.now(UTC)


async def open_store(url: str, *, clock: Callable[[], datetime] = _utcnow) -> SqlStore:
    """A store on ``url`` (``sqlite:///path.db``, ``sqlite://``, ``postgresql://…``).

    Does not migrate: call ``await store.migrate()`` (or ``tickwork db upgrade``) first.
    ``clock`` is what lease expiry is judged by on SQLite (PostgreSQL uses its own clock).
    """
    return SqlStore(create_engines(url), clock=clock)


class SqlStore(
    SqlTokenMethods,
    SqlIdempotencyMethods,
    SqlPoolMethods,
    SqlWorkerMethods,
    SqlHistoryMethods,
    SqlBackfillMethods,
    SqlFenceMethods,
    SqlWebMethods,
    SqlDashboardReads,
    SqlWhyMethods,
    SqlFactsMethods,
):
    """The ``tickwork.ports.Store`` on SQLite or PostgreSQL. See the port for each method.

    Writes run in one transaction each; reads see one snapshot. Unique violations become
    ``Conflict`` at this edge. ``cancel_run``, ``retry_run``, ``cancel_task_run`` and
    ``retry_task_run`` raise ``NotFound`` for an unknown run or task run.
    """

    def __init__(self, engines: Engines, *, clock: Callable[[], datetime] = _utcnow) -> None:
        self._engines = engines
        self._clock = clock  # lease time on SQLite; PostgreSQL judges leases by its own
        self._direct = DirectWriter(engines.write.url) if self.dialect == "postgresql" else None

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._engines.dialect

    async def _write(self, work: Callable[[Connection], T]) -> T:
        return await self._run(self._engines.writers, self._engines.write, work)

    async def _read(self, work: Callable[[Connection], T]) -> T:
        return await self._run(self._engines.readers, self._engines.read, work)

    def _fenced(
        self, fence: Fence | None, work: Callable[[Connection], T]
    ) -> Callable[[Connection], T]:
        """``work`` after the fence check, in the same transaction; unchanged without one."""
        if fence is None:
            return work

        def fenced(conn: Connection) -> T:
            fences.hold(conn, fence, self._clock())
            return work(conn)

        return fenced

    @staticmethod
    async def _run(
        threads: ThreadPoolExecutor, engine: Engine, work: Callable[[Connection], T]
    ) -> T:
        return await SqlStore._on_thread(threads, lambda: _transaction(engine, work))

    @staticmethod
    async def _on_thread(threads: ThreadPoolExecutor, call: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(threads, call)
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            # The connection failed (the server restarting, the network): the transaction
            # did not commit. Callers may retry; anything else is a bug and propagates.
            raise StoreUnavailable(f"database unavailable: {exc.orig or exc}") from exc
        except sa.exc.DBAPIError as exc:
            if exc.connection_invalidated:
                raise StoreUnavailable(f"database connection lost: {exc.orig or exc}") from exc
            raise

    async def migrate(self) -> None:
        # Not through _transaction: on SQLite the upgrade sets a pragma before it begins.
        await self._on_thread(self._engines.writers, lambda: migrate.upgrade(self._engines.write))

    async def close(self) -> None:
        if self._direct is not None:
            await self._direct.close()
        await asyncio.get_running_loop().run_in_executor(None, self._engines.dispose)

    async def truncate_all(self) -> None:
        """Delete every row (tests only): a fast reset between tests on one database."""
        await self._write(_truncate)

    # -- jobs ------------------------------------------------------------------------------
    async def create_jobs(
        self, items: Sequence[tuple[Job, Sequence[NewRun]]], receipt: KeyReceipt | None = None
    ) -> None:
        await self._write(keyed(receipt, lambda conn: jobs.create_jobs(conn, items)))

    async def get_job(self, name: str) -> Job | None:
        return await self._read(lambda conn: jobs.get_job(conn, name))

    async def list_jobs(
        self, *, limit: int = 100, after: str | None = None, where: JobFilter | None = None
    ) -> list[Job]:
        return await self._read(lambda conn: jobs.list_jobs(conn, limit, after, where))

    async def update_job(
        self,
        job: Job,
        expected_updated_at: datetime,
        reschedule: bool,
        runs: Sequence[NewRun] = (),
    ) -> bool:
        return await self._write(
            lambda conn: jobs.update_job(conn, job, expected_updated_at, reschedule, runs)
        )

    async def set_paused(self, job_id: str, paused: bool, now: datetime) -> bool:
        return await self._write(lambda conn: jobs.set_paused(conn, job_id, paused, now))

    async def delete_job(self, job_id: str, now: datetime) -> list[TaskRun]:
        return await self._write(lambda conn: jobs.delete_job(conn, job_id, now))

    async def due_cron_jobs(self, now: datetime, limit: int) -> list[Job]:
        return await self._read(lambda conn: jobs.due_cron_jobs(conn, now, limit))

    async def next_fire_at(self) -> datetime | None:
        return await self._read(jobs.next_fire_at)

    async def materialize(
        self,
        job_id: str,
        expected_next: datetime,
        new_next: datetime | None,
        runs: Sequence[NewRun],
        *,
        fence: Fence | None = None,
    ) -> list[TaskRun]:
        return await self._write(
            self._fenced(
                fence, lambda conn: jobs.materialize(conn, job_id, expected_next, new_next, runs)
            )
        )

    async def materialize_many(
        self, items: Sequence[Materialization], *, fence: Fence | None = None
    ) -> list[TaskRun]:
        def work(conn: Connection) -> list[TaskRun]:
            # Each job's advance stays conditional; the runs of the winners go in together.
            won = [
                new_run
                for item in items
                if jobs.advance_next_fire(
                    conn, item.job_id, item.expected_next, item.new_next, item.runs
                )
                for new_run in item.runs
            ]
            inserted = run_queries.insert_new_runs(conn, won)
            return [tr for tr in inserted if tr.state == TaskRunState.QUEUED]

        return await self._write(self._fenced(fence, work))

    # -- runs ------------------------------------------------------------------------------
    async def create_runs(self, runs: Sequence[NewRun], receipt: KeyReceipt | None = None) -> None:
        await self._write(keyed(receipt, lambda conn: run_queries.insert_runs(conn, runs)))

    async def enqueue_runs(
        self,
        copies: Sequence[RunCopy],
        receipt: KeyReceipt | None = None,
        *,
        planned_from: Job | None = None,
    ) -> None:
        direct = self._direct
        if receipt is None and direct and await enqueue_direct(direct, copies, planned_from):
            return  # one statement on the event loop; see pg_enqueue
        await self._write(
            keyed(receipt, lambda conn: run_queries.enqueue_runs(conn, copies, planned_from))
        )

    async def get_run(self, run_id: str) -> RunDetail | None:
        return await self._read(lambda conn: run_queries.get_run(conn, run_id))

    async def list_runs(
        self,
        *,
        job_id: str | None = None,
        state: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        window: TimeWindow | None = None,
    ) -> RunPage:
        return await self._read(
            lambda conn: run_queries.list_runs(conn, job_id, state, limit, cursor, window=window)
        )

    async def dead_letters(
        self, *, job_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> DeadLetterPage:
        return await self._read(lambda conn: run_queries.dead_letters(conn, job_id, limit, cursor))

    async def cancel_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        return await self._write(lambda conn: run_queries.cancel_run(conn, run_id, now))

    async def retry_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        return await self._write(lambda conn: run_queries.retry_run(conn, run_id, now))

    async def get_task_run(self, task_run_id: str) -> TaskRun | None:
        return await self._read(lambda conn: run_queries.get_task_run(conn, task_run_id))

    async def cancel_task_run(self, task_run_id: str, now: datetime) -> list[TaskRun]:
        return await self._write(lambda conn: run_queries.cancel_task_run(conn, task_run_id, now))

    async def retry_task_run(self, task_run_id: str, now: datetime) -> list[TaskRun]:
        return await self._write(lambda conn: run_queries.retry_task_run(conn, task_run_id, now))

    # -- dispatch and execution ------------------------------------------------------------
    async def due_task_runs(
        self, until: datetime, limit: int, *, after: datetime | None = None
    ) -> list[TaskRun]:
        return await self._read(lambda conn: dispatch.due_task_runs(conn, until, limit, after))

    async def next_due_at(self) -> datetime | None:
        return await self._read(dispatch.next_due_at)

    async def mark_queued(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> list[TaskRun]:
        if not keys:
            return []
        return await self._write(
            self._fenced(fence, lambda conn: dispatch.mark_queued(conn, keys, now))
        )

    async def queue_ahead(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> list[TaskRun]:
        if not keys:
            return []
        return await self._write(
            self._fenced(fence, lambda conn: dispatch.queue_ahead(conn, keys, now))
        )

    async def queued_task_runs(self, queued_before: datetime, limit: int) -> list[TaskRun]:
        return await self._read(lambda conn: dispatch.queued_task_runs(conn, queued_before, limit))

    async def claim(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> list[TaskRun]:
        if not keys:
            return []
        claim = pg_dispatch.claim if self.dialect == "postgresql" else dispatch.claim
        return await self._write(lambda conn: claim(conn, keys, worker_id, now))

    async def heartbeat(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[str]:
        if not keys:
            return set()
        beat = pg_dispatch.heartbeat if self.dialect == "postgresql" else dispatch.heartbeat
        return await self._write(lambda conn: beat(conn, keys, worker_id, now))

    async def complete(
        self, outcomes: Sequence[Outcome], *, fence: Fence | None = None
    ) -> Completion:
        if not outcomes:
            return Completion(applied=[])
        complete = pg_dispatch.complete if self.dialect == "postgresql" else dispatch.complete
        return await self._write(self._fenced(fence, lambda conn: complete(conn, outcomes)))

    async def stale_running(self, heartbeat_before: datetime, limit: int) -> list[TaskRun]:
        return await self._read(lambda conn: dispatch.stale_running(conn, heartbeat_before, limit))

    async def requeue(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> int:
        if not keys:
            return 0
        return await self._write(
            self._fenced(fence, lambda conn: dispatch.requeue(conn, keys, now))
        )

    async def release(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> int:
        if not keys:
            return 0
        return await self._write(lambda conn: dispatch.release(conn, keys, worker_id, now))

    # -- leases ----------------------------------------------------------------------------
    async def acquire_lease(self, name: str, holder: str, ttl: float) -> Lease | None:
        return await self._write(
            lambda conn: leases.acquire(conn, name, holder, ttl, local_now=self._clock())
        )

    async def renew_lease(self, name: str, holder: str, token: int, ttl: float) -> Lease | None:
        return await self._write(
            lambda conn: leases.renew(conn, name, holder, token, ttl, local_now=self._clock())
        )

    async def release_lease(self, name: str, holder: str, token: int) -> bool:
        return await self._write(
            lambda conn: leases.release(conn, name, holder, token, local_now=self._clock())
        )

    async def get_lease(self, name: str) -> Lease | None:
        return await self._read(lambda conn: leases.get(conn, name))

    # -- logs ------------------------------------------------------------------------------
    async def append_logs(self, chunks: Sequence[LogChunk]) -> None:
        if not chunks:
            return
        await self._write(lambda conn: logs.append_logs(conn, chunks))

    async def read_logs(
        self, task_run_id: str, *, after_seq: int = -1, limit: int = 1000
    ) -> list[LogChunk]:
        return await self._read(lambda conn: logs.read_logs(conn, task_run_id, after_seq, limit))


def _transaction(engine: Engine, work: Callable[[Connection], T]) -> T:
    """Run ``work`` in one transaction; unique violations become ``Conflict`` here, at the edge."""
    try:
        with engine.begin() as conn:
            return work(conn)
    except IntegrityError as exc:
        conflict = conflict_from(exc)
        if conflict is None:
            raise
        raise conflict from None


def _truncate(conn: Connection) -> None:
    tables = [t for t in TABLES_CHILDREN_FIRST if on_dialect(t, conn.dialect.name)]
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"TRUNCATE {', '.join(t.name for t in tables)}"))
        return
    for table in tables:
        conn.execute(table.delete())
