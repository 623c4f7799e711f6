"""``Dialect``: everything the SQL store does differently on SQLite and on PostgreSQL.

The store picks one implementation when it is built (``sqlite_dialect.SqliteDialect`` or
``pg_dialect.PostgresDialect``) and hands it to the query modules, which never import either:
they write the statements both databases share, and ask the dialect for the rest (an
import-linter contract holds that). What differs is physical: how rows are locked, how a
duplicate insert is ignored, whose clock judges a lease, how many rows go in at once, the
worker's hot statements, and the monthly partitions of the run history.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from tickwork.core.model import Job, NewRun, Outcome, Run, TaskRun
from tickwork.ports import Beat, Completion, Maintenance, TaskKey
from tickwork.store.run_rows import Row, RunRows

T = TypeVar("T")
__all__ = [
    "Dialect",
    "InsertOf",
    "Row",
    "RunRows",
    "Statement",
    "Writer",
    "insert_ignoring",
    "upsert",
]
#: Runs one unit of work in its own write transaction (the store's ``_write``).
Writer = Callable[[Callable[[Connection], T]], Awaitable[T]]
#: A statement the dialect prepared for the rows given, with its parameters.
Statement = tuple[str, tuple[Any, ...]]
#: A database's own INSERT constructor, the one with ``ON CONFLICT``.
InsertOf = Callable[[sa.Table], postgresql.Insert | sqlite.Insert]


class Dialect(Protocol):
    """One database's way of doing what the store needs. Methods taking ``conn`` run inside
    the caller's transaction."""

    @property
    def name(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""

    @property
    def locks_rows(self) -> bool:
        """Whether rows can be locked (``FOR UPDATE``/``FOR SHARE``). Without, write
        transactions run one at a time (SQLite), so a lock would guard nothing."""

    # -- locks and clocks ------------------------------------------------------------------
    def share_lock(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """``query`` locking the rows it reads against updates until the transaction ends."""

    def update_lock(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """``query`` locking the rows it reads as for an update."""

    def bound_lock_wait(self, conn: Connection, seconds: float) -> None:
        """Make the rest of this transaction wait at most ``seconds`` for a row lock; a
        statement that would wait longer fails with an error ``lock_wait_exceeded`` knows."""

    def lock_wait_exceeded(self, exc: sa.exc.DBAPIError) -> bool:
        """Whether ``exc`` is the failure ``bound_lock_wait`` causes."""

    def now(self) -> sa.ColumnElement[datetime]:
        """The instant a lease is judged at: the server's clock where there is a server."""

    def lease_span(self, seconds: float) -> sa.ColumnElement[datetime]:
        """``now()`` plus ``seconds``: when a lease taken or renewed now expires."""

    def json_array_contains(self, column: sa.Column[Any], value: str) -> sa.ColumnElement[bool]:
        """Whether the JSON array in ``column`` holds ``value``."""

    # -- inserts ---------------------------------------------------------------------------
    @property
    def insert(self) -> InsertOf:
        """The INSERT constructor with ``ON CONFLICT`` (``insert_ignoring``, ``upsert``)."""

    def bulk_insert(
        self, conn: Connection, table: sa.Table, columns: Sequence[str], rows: Sequence[Row]
    ) -> None:
        """Insert ``rows`` (tuples in ``columns`` order, values as the table's types take)."""

    def insert_unique_runs(self, conn: Connection, new_runs: Sequence[NewRun]) -> set[str]:
        """Insert the runs whose (job, logical date) is free; the ids of those inserted."""

    def insert_run_keys(self, conn: Connection, items: Sequence[Run]) -> None:
        """Record the (job, logical date) of runs inserted by ``bulk_insert`` (a taken one
        raises IntegrityError), where the runs table cannot hold that uniqueness itself."""

    def delete_run_keys(
        self, conn: Connection, job_id: str, items: Sequence[tuple[str, datetime]]
    ) -> None:
        """Forget the keys of runs (id, logical date) of one job, deleted with them."""

    def guarded_insert(self, rows: RunRows, planned_from: Job | None) -> Statement | None:
        """One statement inserting ``rows`` only if the job (id, updated_at) is still the
        live one, whose row count says which happened; None to insert them otherwise."""

    async def execute_direct(self, statement: Statement) -> int | None:
        """Run ``statement`` outside the store's threads (autocommit, on the event loop);
        its row count, or None when this dialect cannot or no connection is free."""

    def grouped_insert(self, rows: RunRows, planned: Sequence[datetime]) -> Statement | None:
        """One statement inserting the runs of several enqueues, each run (``rows.runs[i]``)
        only if its job is still at version ``planned[i]`` (its ``updated_at``), returning
        (run id, task runs inserted) per run inserted; None to insert them otherwise."""

    async def fetch_direct(self, statement: Statement) -> list[tuple[Any, ...]] | None:
        """``execute_direct`` of a ``grouped_insert`` statement (the dialect's own
        placeholders), returning the statement's rows."""

    async def read_planned(
        self, query: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]] | None:
        """The rows of ``query`` (one of the store's constant statements, read again and
        again: the scheduler's) read on the event loop, planned once per connection; None
        when this dialect cannot or no connection is free (the caller reads it the usual
        way). Values come as the driver gives them (timestamps aware, in any zone). The
        connection is not pinged first: ``StoreUnavailable`` if it turns out dead (the caller
        reads again the usual way, which replaces dead connections)."""

    # -- the worker's hot statements -------------------------------------------------------
    def claim(
        self, conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> list[TaskRun]:
        """Move the queued task runs with these keys to running for ``worker_id``, and their
        runs to running; the task runs won (without ``inputs``)."""

    def heartbeat(
        self,
        conn: Connection,
        keys: Sequence[TaskKey],
        worker_id: str,
        now: datetime,
        held: Sequence[TaskKey],
    ) -> Beat:
        """Stamp the running task runs of ``worker_id`` with these keys and mark the ``held``
        ones unstarted; which were cancelled and which it no longer holds (``Beat``)."""

    def start(
        self, conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> set[TaskKey]:
        """Stamp ``started_at`` (and ``heartbeat_at``) of the running task runs of
        ``worker_id`` with these keys; the keys it still held (``ExecutionStore.start``)."""

    def lock_running(
        self, conn: Connection, keys: Sequence[TaskKey]
    ) -> Sequence[Mapping[str, Any]]:
        """Lock the running task runs with these keys in id order; ``completion.LOCKED``
        columns plus ``siblings`` (how many task runs their run has)."""

    async def claim_direct(
        self, keys: Sequence[TaskKey], worker_id: str, now: datetime
    ) -> list[TaskRun] | None:
        """``claim`` outside the store's threads (autocommit, on the event loop), or None
        when this dialect cannot or no connection is free (the caller runs ``claim``)."""

    async def heartbeat_direct(
        self, keys: Sequence[TaskKey], worker_id: str, now: datetime, held: Sequence[TaskKey]
    ) -> Beat | None:
        """``heartbeat`` outside the store's threads, or None as for ``claim_direct``."""

    async def complete_direct(
        self, outcomes: Sequence[Outcome]
    ) -> tuple[Completion, list[Outcome]] | None:
        """``completion.complete`` outside the store's threads (autocommit, on the event loop)
        of the outcomes whose runs hold one task run: what it did, and the outcomes it left
        unwritten for ``completion.complete`` (runs of several task runs, whose DAG advances
        through ``refresh_runs``). None when this dialect cannot or no connection is free."""

    def write_outcomes(
        self,
        conn: Connection,
        completed: Sequence[dict[str, Any]],
        history: Sequence[dict[str, Any]],
        alone: Sequence[dict[str, Any]],
    ) -> None:
        """Write outcomes to locked task runs, their attempts, and the runs of single-task
        runs (the values of ``completion.completion_values``, ``attempt_values`` and
        ``single_run_values``)."""

    # -- housekeeping ----------------------------------------------------------------------
    async def maintain(
        self, write: Writer[Any], now: datetime, retention_days: int | None, ahead: int
    ) -> Maintenance:
        """Partitions ahead (where the history is partitioned) and retention."""

    def truncate(self, conn: Connection, tables: Sequence[sa.Table]) -> None:
        """Delete every row of ``tables`` (children first)."""

    def upgrade(self, engine: Engine, revision: str) -> None:
        """Run the migrations up to ``revision``."""

    async def close(self) -> None:
        """Close what the dialect opened itself (connections outside the engine)."""


def insert_ignoring(
    dialect: Dialect,
    table: sa.Table,
    index_elements: Sequence[str],
    index_where: sa.ColumnElement[bool] | sa.TextClause | None = None,
) -> sa.Insert:
    """``INSERT … ON CONFLICT (index_elements) [WHERE index_where] DO NOTHING``."""
    return dialect.insert(table).on_conflict_do_nothing(
        index_elements=index_elements, index_where=index_where
    )


def upsert(
    dialect: Dialect,
    table: sa.Table,
    values: dict[str, Any],
    *,
    index_elements: Sequence[str],
    set_: dict[str, Any],
    where: sa.ColumnElement[bool],
) -> sa.Insert:
    """``INSERT … ON CONFLICT (index_elements) DO UPDATE SET set_ WHERE where``."""
    return (
        dialect.insert(table)
        .values(**values)
        .on_conflict_do_update(index_elements=index_elements, set_=set_, where=where)
    )
