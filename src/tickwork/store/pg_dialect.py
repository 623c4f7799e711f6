"""The PostgreSQL ``Dialect``: row locks, the server's clock, ``COPY``, the worker's hot
statements through psycopg (``pg_dispatch``), ``run_keys`` and monthly partitions.

Many processes write at once here, so whatever reads a row in order to change it locks it,
always in key order, so that two transactions never wait on each other in a circle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Engine

from tickwork.core.model import Job, NewRun, Outcome, Run, TaskRun
from tickwork.ports import Beat, Completion, Maintenance, TaskKey
from tickwork.store import migrate, pg_dispatch, pg_enqueue, pg_hot, retention, run_keys
from tickwork.store.columns import UTCDateTime
from tickwork.store.dialect import InsertOf, Row, RunRows, Statement, Writer
from tickwork.store.pg_copy import copy_rows
from tickwork.store.pg_direct import DirectWriter
from tickwork.store.rows import run_to_row
from tickwork.store.schema import runs

LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a lock_timeout that expired


class PostgresDialect:
    """See ``Dialect``. ``direct`` runs single enqueues on the event loop."""

    name = "postgresql"
    locks_rows = True

    def __init__(self, direct: DirectWriter) -> None:
        self._direct = direct

    def share_lock(self, query: sa.Select[Any]) -> sa.Select[Any]:
        return query.with_for_update(read=True)

    def update_lock(self, query: sa.Select[Any]) -> sa.Select[Any]:
        return query.with_for_update()

    def bound_lock_wait(self, conn: Connection, seconds: float) -> None:
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{max(int(seconds * 1000), 1)}ms'")

    def lock_wait_exceeded(self, exc: sa.exc.DBAPIError) -> bool:
        return getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE

    def now(self) -> sa.ColumnElement[datetime]:
        return sa.func.clock_timestamp(type_=UTCDateTime())

    def lease_span(self, seconds: float) -> sa.ColumnElement[datetime]:
        span = sa.literal(timedelta(seconds=seconds), sa.Interval())
        return sa.func.clock_timestamp(type_=UTCDateTime()) + span

    def json_array_contains(self, column: sa.Column[Any], value: str) -> sa.ColumnElement[bool]:
        return sa.cast(column, postgresql.JSONB).contains([value])

    # -- inserts ---------------------------------------------------------------------------
    @property
    def insert(self) -> InsertOf:
        return postgresql.insert

    def bulk_insert(
        self, conn: Connection, table: sa.Table, columns: Sequence[str], rows: Sequence[Row]
    ) -> None:
        if rows:
            copy_rows(conn, table, columns, rows)

    def insert_unique_runs(self, conn: Connection, new_runs: Sequence[NewRun]) -> set[str]:
        # ``runs`` is partitioned by id, so its (job, logical date) uniqueness is the primary
        # key of ``run_keys``: take the keys first.
        free = run_keys.take_keys(conn, new_runs)
        if free:
            conn.execute(runs.insert(), [run_to_row(n.run) for n in free])
        return {n.run.id for n in free}

    def insert_run_keys(self, conn: Connection, items: Sequence[Run]) -> None:
        run_keys.insert_keys(conn, items)

    def delete_run_keys(
        self, conn: Connection, job_id: str, items: Sequence[tuple[str, datetime]]
    ) -> None:
        run_keys.delete_keys(conn, job_id, items)

    def guarded_insert(self, rows: RunRows, planned_from: Job | None) -> Statement | None:
        return pg_enqueue.statement(rows, planned_from) if pg_enqueue.fits(rows) else None

    async def execute_direct(self, statement: Statement) -> int | None:
        return await self._direct.execute(*statement)

    def grouped_insert(self, rows: RunRows, planned: Sequence[datetime]) -> Statement | None:
        return pg_enqueue.group_statement(rows, planned) if pg_enqueue.fits_group(rows) else None

    async def fetch_direct(self, statement: Statement) -> list[tuple[Any, ...]] | None:
        return await self._direct.fetch(*statement)

    async def read_planned(
        self, query: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]] | None:
        return await self._direct.run(
            lambda conn: pg_hot.read_planned(conn, query, params), ping=False
        )

    # -- the worker's hot statements -------------------------------------------------------
    def claim(
        self, conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> list[TaskRun]:
        return pg_dispatch.claim(conn, keys, worker_id, now)

    def heartbeat(
        self,
        conn: Connection,
        keys: Sequence[TaskKey],
        worker_id: str,
        now: datetime,
        held: Sequence[TaskKey],
    ) -> Beat:
        return pg_dispatch.heartbeat(conn, keys, worker_id, now, held)

    def start(
        self, conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> set[TaskKey]:
        return pg_dispatch.start(conn, keys, worker_id, now)

    def lock_running(
        self, conn: Connection, keys: Sequence[TaskKey]
    ) -> Sequence[Mapping[Any, Any]]:
        return pg_dispatch.lock_running(conn, keys)

    async def claim_direct(
        self, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> list[TaskRun] | None:
        return await self._direct.run(lambda conn: pg_hot.claim(conn, keys, worker_id, now))

    async def heartbeat_direct(
        self, keys: Sequence[TaskKey], worker_id: str, now: datetime, held: Sequence[TaskKey]
    ) -> Beat | None:
        return await self._direct.run(
            lambda conn: pg_hot.heartbeat(conn, keys, worker_id, now, held)
        )

    async def complete_direct(
        self, outcomes: Sequence[Outcome]
    ) -> tuple[Completion, list[Outcome]] | None:
        return await self._direct.run(lambda conn: pg_hot.complete(conn, outcomes))

    def write_outcomes(
        self,
        conn: Connection,
        completed: Sequence[dict[str, Any]],
        history: Sequence[dict[str, Any]],
        alone: Sequence[dict[str, Any]],
    ) -> None:
        pg_dispatch.write_outcomes(conn, completed, history, alone)

    # -- housekeeping ----------------------------------------------------------------------
    async def maintain(
        self, write: Writer[Any], now: datetime, retention_days: int | None, ahead: int
    ) -> Maintenance:
        return await retention.maintain_partitions(write, now, retention_days, ahead)

    def truncate(self, conn: Connection, tables: Sequence[sa.Table]) -> None:
        conn.execute(sa.text(f"TRUNCATE {', '.join(t.name for t in tables)}"))

    def upgrade(self, engine: Engine, revision: str) -> None:
        migrate.upgrade_postgresql(engine, revision)

    async def close(self) -> None:
        await self._direct.close()
