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

from tickwork.core.model import Job, NewRun, Outcome, Run, TaskRun, TaskRunState
from tickwork.ports import Beat, Completion, Maintenance, TaskKey
from tickwork.store import completion, migrate, partitions
from tickwork.store import sqlite_raw as raw
from tickwork.store.columns import UTCDateTime
from tickwork.store.dialect import InsertOf, Row, RunRows, Statement, Writer, insert_ignoring
from tickwork.store.rows import run_to_row, task_run_from_row
from tickwork.store.schema import RUNS_UNIQUE_WHERE, attempts, runs, task_runs

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
        raw.insert_rows(conn, table, tuple(columns), rows)

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

    def grouped_insert(self, rows: RunRows, planned: Sequence[datetime]) -> Statement | None:
        return None

    async def fetch_direct(self, statement: Statement) -> list[tuple[Any, ...]] | None:
        return None

    async def read_planned(
        self, query: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]] | None:
        return None  # reads cost no planning worth saving here

    async def claim_direct(
        self, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> list[TaskRun] | None:
        return None  # one writer thread: the engine's path is the only one

    async def heartbeat_direct(
        self, keys: Sequence[TaskKey], worker_id: str, now: datetime, held: Sequence[TaskKey]
    ) -> Beat | None:
        return None

    async def complete_direct(
        self, outcomes: Sequence[Outcome]
    ) -> tuple[Completion, list[Outcome]] | None:
        return None

    # -- the worker's hot statements -------------------------------------------------------
    # On the driver's connection (``sqlite_raw``): one primary-key statement per key, which
    # SQLite runs in microseconds from its statement cache, instead of SQLAlchemy's per-row
    # processing of one ``IN (…)`` statement.
    @raw.translated
    def claim(
        self, conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> list[TaskRun]:
        db, stamp = raw.driver(conn), raw.bound(task_runs, ("started_at",), (now,))[0]
        won = [
            row
            for key in keys
            for row in db.execute(_CLAIM, (worker_id, stamp, stamp, *key)).fetchall()
        ]
        claimed = [task_run_from_row(r) for r in raw.decoded(task_runs, _ALL, won)]
        run_ids = sorted({tr.run_id for tr in claimed})
        db.executemany(_RUN_RUNNING, [(stamp, run_id) for run_id in run_ids])
        return claimed

    @raw.translated
    def start(
        self, conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> set[TaskKey]:
        # One statement per key, as the claim. Through Core, each start batch (held task runs
        # start a few at a time) paid SQLAlchemy's coercion and compilation of an ``IN`` of
        # (id, attempt) tuples: a third of the writer thread's samples in a W1 profile.
        db, stamp = raw.driver(conn), raw.bound(task_runs, ("started_at",), (now,))[0]
        return {
            (row[0], row[1])
            for key in keys
            for row in db.execute(_START, (stamp, stamp, *key, worker_id)).fetchall()
        }

    @raw.translated
    def heartbeat(
        self,
        conn: Connection,
        keys: Sequence[TaskKey],
        worker_id: str,
        now: datetime,
        held: Sequence[TaskKey],
    ) -> Beat:
        beat = Beat()
        db, stamp = raw.driver(conn), raw.bound(task_runs, ("heartbeat_at",), (now,))[0]
        for task_run_id, attempt in keys:
            found = db.execute(_BEAT, (stamp, task_run_id, attempt, worker_id)).fetchall()
            if not found:
                beat.abandoned.add((task_run_id, attempt))
            elif found[0][0]:
                beat.cancelled.add(task_run_id)
        db.executemany(_HOLD, [(*key, worker_id) for key in held])
        return beat

    @raw.translated
    def lock_running(
        self, conn: Connection, keys: Sequence[TaskKey]
    ) -> Sequence[Mapping[Any, Any]]:
        db = raw.driver(conn)  # no lock: this transaction is the only writer
        found = [row for key in keys for row in db.execute(_LOCK, key).fetchall()]
        rows = raw.decoded(task_runs, _LOCKED_NAMES, found)
        return sorted(rows, key=lambda row: str(row["id"]))

    @raw.translated
    def write_outcomes(
        self,
        conn: Connection,
        completed: Sequence[dict[str, Any]],
        history: Sequence[dict[str, Any]],
        alone: Sequence[dict[str, Any]],
    ) -> None:
        # ``bound_rows``: an outcome's timestamps recur in its attempt and its run, and the
        # rows of a batch share the ones read back (due dates, heartbeats).
        db, names = raw.driver(conn), completion.COMPLETED_COLUMNS
        rows = raw.bound_rows(task_runs, names, [[v[n] for n in names] for v in completed])
        db.executemany(
            _COMPLETE, [[*row, *_key(v)] for row, v in zip(rows, completed, strict=True)]
        )
        raw.insert_rows(conn, attempts, _ATTEMPT, [[h[name] for name in _ATTEMPT] for h in history])
        ends = raw.bound_rows(runs, _RUN_OUTCOME, [[v[n] for n in _RUN_OUTCOME] for v in alone])
        db.executemany(
            _SINGLE_RUN, [[*end, v["key_id"]] for end, v in zip(ends, alone, strict=True)]
        )

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


_ALL = tuple(task_runs.c.keys())
_CLAIM = (
    "UPDATE task_runs SET state = 'running', worker_id = ?, started_at = ?, heartbeat_at = ?"
    f" WHERE id = ? AND attempt = ? AND state = 'queued' RETURNING {', '.join(_ALL)}"
)
#: A run holding a running task run is running (``dispatch.mark_runs_running``).
_RUN_RUNNING = (
    "UPDATE runs SET state = 'running', started_at = coalesce(started_at, ?),"
    " finished_at = NULL WHERE id = ?"
)
_MINE = "id = ? AND attempt = ? AND state = 'running' AND worker_id = ?"
_BEAT = f"UPDATE task_runs SET heartbeat_at = ? WHERE {_MINE} RETURNING cancel_requested"
_HOLD = f"UPDATE task_runs SET started_at = NULL WHERE {_MINE}"
_START = (
    f"UPDATE task_runs SET started_at = ?, heartbeat_at = ? WHERE {_MINE} RETURNING id, attempt"
)
_LOCKED_NAMES = (*completion.LOCKED, "siblings")
_LOCK = (
    f"SELECT {', '.join(f't.{name}' for name in completion.LOCKED)},"
    " (SELECT count(*) FROM task_runs s WHERE s.run_id = t.run_id)"
    " FROM task_runs t WHERE t.id = ? AND t.attempt = ? AND t.state = 'running'"
)
_COMPLETE = (
    f"UPDATE task_runs SET {', '.join(f'{n} = ?' for n in completion.COMPLETED_COLUMNS)}"
    " WHERE id = ? AND attempt = ? AND state = 'running'"
)
_ATTEMPT = tuple(attempts.c.keys())
_SINGLE_RUN = (
    # The run started when its first attempt did; a retry keeps that.
    "UPDATE runs SET state = ?, started_at = coalesce(started_at, ?), finished_at = ? WHERE id = ?"
)


def _key(values: dict[str, Any]) -> tuple[str, int]:
    return values["key_id"], values["key_attempt"]


_RUN_OUTCOME = ("state", "started_at", "finished_at")
