"""``SqlStore``: the ``Store`` port on SQLite or PostgreSQL (SQLAlchemy Core).

Each operation is one transaction, run on a store thread (see ``engine.py`` for why), and
delegates to a plain query module (``jobs``, ``runs``, ``dispatch``, …) with the store's
``Dialect``, chosen here once from the URL: the one place that knows which database it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial

from sqlalchemy.exc import IntegrityError

from tickwork.core.model import (
    Job,
    NewRun,
    Outcome,
    RunDetail,
    TaskRun,
)
from tickwork.ports import (
    Beat,
    Completion,
    DeadLetterPage,
    EnqueueEntry,
    Fence,
    JobFilter,
    KeyReceipt,
    Materialization,
    NextWork,
    RunCopy,
    RunFilter,
    RunPage,
    TaskKey,
    TimeWindow,
)
from tickwork.store import (
    backfills,
    completion,
    dispatch,
    enqueue_groups,
    jobs,
    next_work,
)
from tickwork.store import runs as run_queries
from tickwork.store.columns import on_dialect
from tickwork.store.common import conflict_from
from tickwork.store.dialect import Dialect
from tickwork.store.engine import Engines, create_engines, libpq_conninfo
from tickwork.store.idempotency import keyed
from tickwork.store.pg_dialect import PostgresDialect
from tickwork.store.pg_direct import DirectWriter
from tickwork.store.pg_listen import EnqueueListener
from tickwork.store.run_rows import rows_of_copies
from tickwork.store.schema import TABLES_CHILDREN_FIRST
from tickwork.store.sql_upkeep import SqlUpkeep
from tickwork.store.sqlite_dialect import SqliteDialect


def _utcnow() -> datetime:
    return datetime.now(UTC)


async def open_store(url: str, *, clock: Callable[[], datetime] = _utcnow) -> SqlStore:
    """A store on ``url`` (``sqlite:///path.db``, ``sqlite://``, ``postgresql://…``).

    Does not migrate: call ``await store.migrate()`` (or ``tickwork db upgrade``) first.
    ``clock`` is what lease expiry is judged by on SQLite (PostgreSQL uses its own clock).
    """
    return SqlStore(create_engines(url), clock=clock)


def dialect_for(engines: Engines, clock: Callable[[], datetime]) -> Dialect:
    """The dialect of the store on ``engines``; ``clock`` judges leases on SQLite."""
    if engines.dialect == "postgresql":
        return PostgresDialect(DirectWriter(engines.write.url))
    return SqliteDialect(clock)


class SqlStore(SqlUpkeep):
    """The ``tickwork.ports.Store`` on SQLite or PostgreSQL. See the port for each method.

    Writes run in one transaction each; reads see one snapshot. Unique violations become
    ``Conflict`` at this edge. ``cancel_run``, ``retry_run``, ``cancel_task_run`` and
    ``retry_task_run`` raise ``NotFound`` for an unknown run or task run.

    One line of classes, each part written once: ``SqlTransactions`` (transactions.py) runs
    query-module calls; ``SqlViews`` (sql_views.py) holds the parts beside the hot path
    (tokens, pools, workers, web, dashboard reads, alerts, why, facts); ``SqlUpkeep``
    (sql_upkeep.py) holds leases, logs, history and backfills; this class holds jobs, runs
    and dispatch, and picks the dialect.
    """

    def __init__(self, engines: Engines, *, clock: Callable[[], datetime] = _utcnow) -> None:
        super().__init__(engines, dialect_for(engines, clock))

    def enqueue_listener(self) -> EnqueueListener | None:
        """A listener for enqueues committed by ``tickwork.outbox`` (PostgreSQL); None on
        SQLite, where nothing else writes the database."""
        if self.dialect != "postgresql":
            return None
        return EnqueueListener(libpq_conninfo(self._engines.write.url))

    async def migrate(self) -> None:
        # Not through _transaction: on SQLite the upgrade sets a pragma before it begins.
        engines = self._engines

        def upgrade() -> None:
            with engines.writer_released():  # the upgrade takes the pool's one connection
                self._d.upgrade(engines.write, "head")

        await self._on_thread(engines.writers, upgrade)

    async def close(self) -> None:
        await self._d.close()
        await asyncio.get_running_loop().run_in_executor(None, self._engines.dispose)

    async def truncate_all(self) -> None:
        """Delete every row (tests only): a fast reset between tests on one database."""
        tables = [t for t in TABLES_CHILDREN_FIRST if on_dialect(t, self.dialect)]
        await self._write(lambda conn: self._d.truncate(conn, tables))

    # -- jobs ------------------------------------------------------------------------------
    async def create_jobs(
        self, items: Sequence[tuple[Job, Sequence[NewRun]]], receipt: KeyReceipt | None = None
    ) -> None:
        d = self._d
        await self._write(keyed(d, receipt, lambda conn: jobs.create_jobs(conn, d, items)))

    async def get_job(self, name: str) -> Job | None:
        return await self._read(lambda conn: jobs.get_job(conn, name))

    async def history_job_id(self, name: str) -> str | None:
        return await self._read(lambda conn: jobs.history_job_id(conn, name))

    async def list_jobs(
        self, *, limit: int = 100, after: str | None = None, where: JobFilter | None = None
    ) -> list[Job]:
        return await self._read(lambda conn: jobs.list_jobs(conn, self._d, limit, after, where))

    async def update_job(
        self,
        job: Job,
        expected_updated_at: datetime,
        reschedule: bool,
        runs: Sequence[NewRun] = (),
    ) -> bool:
        return await self._write(
            lambda conn: jobs.update_job(
                conn, self._d, job, expected_updated_at, reschedule, new_runs=runs
            )
        )

    async def set_paused(self, job_id: str, paused: bool, now: datetime) -> bool:
        return await self._write(lambda conn: jobs.set_paused(conn, self._d, job_id, paused, now))

    async def delete_job(self, job_id: str, now: datetime) -> list[TaskRun]:
        return await self._write(lambda conn: jobs.delete_job(conn, self._d, job_id, now))

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
                fence,
                lambda conn: jobs.materialize(
                    conn, self._d, job_id, expected_next, new_next, new_runs=runs
                ),
            )
        )

    async def materialize_many(
        self, items: Sequence[Materialization], *, fence: Fence | None = None
    ) -> list[TaskRun]:
        work = partial(jobs.materialize_many, dialect=self._d, items=items)
        return await self._write(self._fenced(fence, work))

    # -- runs ------------------------------------------------------------------------------
    async def create_runs(self, runs: Sequence[NewRun], receipt: KeyReceipt | None = None) -> None:
        d = self._d
        await self._write(keyed(d, receipt, lambda conn: run_queries.insert_runs(conn, d, runs)))

    async def enqueue_runs(
        self,
        copies: Sequence[RunCopy],
        receipt: KeyReceipt | None = None,
        *,
        planned_from: Job | None = None,
    ) -> None:
        d, rows = self._d, rows_of_copies(copies)
        statement = d.guarded_insert(rows, planned_from)
        if receipt is None and statement is not None:
            # One autocommit statement, on the event loop when a connection is free.
            try:
                rowcount = await d.execute_direct(statement)
            except IntegrityError as exc:
                raise conflict_from(exc) or exc from None
            if rowcount is not None:
                run_queries.check_guarded(rowcount, rows, planned_from)
                return
        await self._write(
            keyed(
                d,
                receipt,
                lambda conn: run_queries.enqueue_rows(conn, d, rows, statement, planned_from),
            )
        )

    async def enqueue_each(self, entries: Sequence[EnqueueEntry]) -> list[Exception | None]:
        d = self._d
        if not any(e.receipt for e in entries):
            rows = rows_of_copies([c for e in entries for c in e.copies])
            planned = [e.planned_from.updated_at for e in entries for _ in e.copies]
            statement = d.grouped_insert(rows, planned)
            if statement is not None:
                try:  # one autocommit statement, on the event loop when a connection is free
                    inserted = await d.fetch_direct(statement)
                except IntegrityError as exc:
                    raise conflict_from(exc) or exc from None
                if inserted is not None:
                    return enqueue_groups.outcomes_of(entries, inserted)
        return await self._write(lambda conn: enqueue_groups.enqueue_each(conn, d, entries))

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
        also: RunFilter | None = None,
    ) -> RunPage:
        return await self._read(
            lambda conn: run_queries.list_runs(
                conn, job_id, state, limit, cursor, window=window, also=also, dialect=self._d
            )
        )

    async def dead_letters(
        self, *, job_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> DeadLetterPage:
        return await self._read(lambda conn: run_queries.dead_letters(conn, job_id, limit, cursor))

    async def cancel_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        return await self._write(lambda conn: run_queries.cancel_run(conn, run_id, now))

    async def retry_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        return await self._write(lambda conn: run_queries.retry_run(conn, run_id, now))

    async def replay_run(self, run_id: str, now: datetime) -> int:
        return await self._write(lambda conn: backfills.replay_run(conn, run_id, now))

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

    async def next_work(self, after: datetime) -> NextWork:
        (row,) = await self._read_planned(next_work.statement(), {"after": after})
        return next_work.of_row(row)

    async def mark_queued(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> list[TaskRun]:
        if not keys:
            return []
        return await self._write(
            self._fenced(fence, lambda conn: dispatch.mark_queued(conn, self._d, keys, now))
        )

    async def queue_ahead(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> list[TaskRun]:
        if not keys:
            return []
        return await self._write(
            self._fenced(fence, lambda conn: dispatch.queue_ahead(conn, self._d, keys, now))
        )

    async def queued_task_runs(self, queued_before: datetime, limit: int) -> list[TaskRun]:
        params = {"before": queued_before, "limit": limit}
        return dispatch.task_runs_of(await self._read_planned(dispatch.QUEUED_BEFORE, params))

    async def queued_counts(self, queued_before: datetime, limit: int) -> dict[str, int]:
        params = {"before": queued_before, "limit": limit}
        rows = await self._read_planned(dispatch.QUEUED_COUNTS, params)
        return {str(queue): int(n) for queue, n in rows}

    async def claim(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> list[TaskRun]:
        if not keys:
            return []
        claimed = await self._d.claim_direct(keys, worker_id, now)  # on this loop if it can
        if claimed is None:
            return await self._write_alone(
                lambda conn: dispatch.claim(conn, self._d, keys, worker_id, now),
                rows=len(keys),
                starts=True,
            )
        if not any(tr.upstream for tr in claimed):
            return claimed
        return await self._read(lambda conn: dispatch.with_inputs(conn, claimed))

    async def heartbeat(
        self,
        keys: Sequence[TaskKey],
        worker_id: str,
        now: datetime,
        *,
        held: Sequence[TaskKey] = (),
    ) -> Beat:
        if not keys:
            return Beat()
        beat = await self._d.heartbeat_direct(keys, worker_id, now, held)
        if beat is not None:
            return beat
        return await self._write_alone(  # one statement on PostgreSQL (SQLite: a transaction)
            lambda conn: dispatch.heartbeat(conn, self._d, keys, worker_id, now, held=held),
            rows=len(keys),
        )

    async def start(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[TaskKey]:
        if not keys:
            return set()
        return await self._write_alone(  # one statement on PostgreSQL (SQLite: a transaction)
            lambda conn: self._d.start(conn, keys, worker_id, now), rows=len(keys), starts=True
        )

    async def requeue_unstarted(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> list[TaskRun]:
        if not keys:
            return []
        return await self._write(
            self._fenced(fence, lambda conn: dispatch.requeue_unstarted(conn, keys, now))
        )

    async def complete(
        self, outcomes: Sequence[Outcome], *, fence: Fence | None = None
    ) -> Completion:
        if not outcomes:
            return Completion(applied=[])
        if fence is None and (direct := await self._d.complete_direct(outcomes)) is not None:
            done, rest = direct  # the outcomes of DAG runs are left for the engine's path
            if not rest:
                return done
            more = await self._write(lambda conn: completion.complete(conn, self._d, rest))
            return completion.merged(done, more)
        return await self._write(
            self._fenced(fence, lambda conn: completion.complete(conn, self._d, outcomes)),
            rows=len(outcomes),
        )

    async def stale_running(self, heartbeat_before: datetime, limit: int) -> list[TaskRun]:
        params = {"before": heartbeat_before, "limit": limit}
        return dispatch.task_runs_of(await self._read_planned(dispatch.STALE_BEFORE, params))

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
