"""The SQLite ``Dialect``: one machine, one writer at a time, SQLAlchemy Core statements.

SQLite runs write transactions one at a time (each begins ``IMMEDIATE``, see ``engine``),
so nothing here locks rows: a transaction that has begun cannot be overtaken. Leases are
judged by the store's clock, the database having none of its own worth trusting across
processes on one machine any more than that one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Engine

from tickwork.core.model import Job, NewRun, Run, TaskRun, TaskRunState
from tickwork.ports import Beat, Maintenance, TaskKey
from tickwork.store import dispatch, migrate, partitions
from tickwork.store.common import chunked, key_in
from tickwork.store.dialect import InsertOf, Row, RunRows, Statement, Writer, insert_ignoring
from tickwork.store.rows import run_to_row
from tickwork.store.schema import RUNS_UNIQUE_WHERE, UTCDateTime, attempts, runs, task_runs

S = TaskRunState


class SqliteDialect:
    """See ``Dialect``. ``clock`` is what leases are judged by."""

    name = "sqlite"
    locks_rows = False

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

    def share_lock(self, query: sa.Select[Any]) -> sa.Select[Any]:
        return query

    def update_lock(self, query: sa.Select[Any]) -> sa.Select[Any]:
        return query

    def bound_lock_wait(self, conn: Connection, seconds: float) -> None:
        pass  # no row locks: a write transaction holds the whole database from its start

    def lock_wait_exceeded(self, exc: sa.exc.DBAPIError) -> bool:
        return False

    def now(self) -> sa.ColumnElement[datetime]:
        return sa.literal(self._clock(), UTCDateTime())

    def lease_span(self, seconds: float) -> sa.ColumnElement[datetime]:
        return sa.literal(self._clock() + timedelta(seconds=seconds), UTCDateTime())

    def json_array_contains(self, column: sa.Column[Any], value: str) -> sa.ColumnElement[bool]:
        each = sa.func.json_each(column).table_valued("value")
        return sa.exists(sa.select(sa.literal(1)).select_from(each).where(each.c.value == value))

    # -- inserts ---------------------------------------------------------------------------
    @property
    def insert(self) -> InsertOf:
        return sqlite.insert

    def bulk_insert(
        self, conn: Connection, table: sa.Table, columns: Sequence[str], rows: Sequence[Row]
    ) -> None:
        if rows:
            conn.execute(table.insert(), [dict(zip(columns, row, strict=True)) for row in rows])

    def insert_unique_runs(self, conn: Connection, new_runs: Sequence[NewRun]) -> set[str]:
        # The (job, logical date) uniqueness is a partial unique index of ``runs`` here.
        stmt = insert_ignoring(self, runs, ["job_id", "logical_date"], RUNS_UNIQUE_WHERE)
        result = conn.execute(stmt.returning(runs.c.id), [run_to_row(n.run) for n in new_runs])
        return set(result.scalars().all())

    def insert_run_keys(self, conn: Connection, items: Sequence[Run]) -> None:
        return None  # the unique index of ``runs`` holds them

    def delete_run_keys(
        self, conn: Connection, job_id: str, items: Sequence[tuple[str, datetime]]
    ) -> None:
        return None

    def guarded_insert(self, rows: RunRows, planned_from: Job | None) -> Statement | None:
        return None  # a check and an executemany cost no round trips on SQLite

    async def execute_direct(self, statement: Statement) -> int | None:
        return None

    # -- the worker's hot statements -------------------------------------------------------
    def claim(
        self, conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> list[TaskRun]:
        values: dict[str, Any] = {"state": S.RUNNING.value, "worker_id": worker_id}
        values |= {"started_at": now, "heartbeat_at": now}
        won = dispatch.update_returning(conn, keys, task_runs.c.state == S.QUEUED.value, values)
        dispatch.mark_runs_running(conn, {tr.run_id for tr in won}, now)
        return won

    def heartbeat(
        self,
        conn: Connection,
        keys: Sequence[TaskKey],
        worker_id: str,
        now: datetime,
        held: Sequence[TaskKey],
    ) -> Beat:
        beat = Beat()
        found: set[TaskKey] = set()
        mine = sa.and_(task_runs.c.state == S.RUNNING.value, task_runs.c.worker_id == worker_id)
        for chunk in chunked(keys):
            result = conn.execute(
                sa.update(task_runs)
                .where(key_in(chunk), mine)
                .values(heartbeat_at=now)
                .returning(task_runs.c.id, task_runs.c.attempt, task_runs.c.cancel_requested)
            )
            for row in result:
                found.add((row.id, row.attempt))
                if row.cancel_requested:
                    beat.cancelled.add(row.id)
        for chunk in chunked(held):
            conn.execute(sa.update(task_runs).where(key_in(chunk), mine).values(started_at=None))
        beat.abandoned.update(set(keys) - found)
        return beat

    def lock_running(
        self, conn: Connection, keys: Sequence[TaskKey]
    ) -> Sequence[Mapping[Any, Any]]:
        found: list[Mapping[Any, Any]] = []  # no lock: this transaction is the only writer
        for chunk in chunked(keys):
            query = (
                sa.select(*_LOCKED, _SIBLINGS)
                .where(key_in(chunk), task_runs.c.state == S.RUNNING.value)
                .order_by(task_runs.c.id)
            )
            found += conn.execute(query).mappings().all()
        return found

    def write_outcomes(
        self,
        conn: Connection,
        completed: Sequence[dict[str, Any]],
        history: Sequence[dict[str, Any]],
        alone: Sequence[dict[str, Any]],
    ) -> None:
        conn.execute(_COMPLETE, [_params(v) for v in completed])
        conn.execute(attempts.insert(), list(history))
        if alone:
            conn.execute(_SINGLE_RUN, [_params(v) for v in alone])

    # -- housekeeping ----------------------------------------------------------------------
    async def maintain(
        self, write: Writer[Any], now: datetime, retention_days: int | None, ahead: int
    ) -> Maintenance:
        # No partitions: retention deletes old runs a batch per transaction.
        if retention_days is None:
            return Maintenance()
        before = (now - timedelta(days=retention_days)).astimezone(UTC)
        batch, deleted = partitions.RETENTION_BATCH, 0
        while True:
            done: int = await write(lambda conn: partitions.delete_old_runs(conn, before, batch))
            deleted += done
            if done < batch:
                return Maintenance(deleted_runs=deleted)

    def truncate(self, conn: Connection, tables: Sequence[sa.Table]) -> None:
        for table in tables:
            conn.execute(table.delete())

    def upgrade(self, engine: Engine, revision: str) -> None:
        migrate.upgrade_sqlite(engine, revision)

    async def close(self) -> None:
        return None


_LOCKED = tuple(task_runs.c[name] for name in dispatch.LOCKED)
_siblings = sa.alias(task_runs, "siblings")
_SIBLINGS = (
    sa.select(sa.func.count())
    .where(_siblings.c.run_id == task_runs.c.run_id)
    .scalar_subquery()
    .label("siblings")
)


def _param(column: sa.Column[Any]) -> sa.BindParameter[Any]:
    return sa.bindparam(f"p_{column.name}", type_=column.type)


def _params(values: dict[str, Any]) -> dict[str, Any]:
    return {f"p_{name}": value for name, value in values.items()}


_COMPLETE = (
    sa.update(task_runs)
    .where(
        task_runs.c.id == sa.bindparam("p_key_id"),
        task_runs.c.attempt == sa.bindparam("p_key_attempt"),
        task_runs.c.state == S.RUNNING.value,
    )
    .values({name: _param(task_runs.c[name]) for name in dispatch.COMPLETED_COLUMNS})
)

_SINGLE_RUN = (
    sa.update(runs)
    .where(runs.c.id == sa.bindparam("p_key_id"))
    .values(
        state=_param(runs.c.state),
        # The run started when its first attempt did; a retry keeps that.
        started_at=sa.func.coalesce(runs.c.started_at, _param(runs.c.started_at)),
        finished_at=_param(runs.c.finished_at),
    )
)
