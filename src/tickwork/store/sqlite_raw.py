"""SQLite's hot statements run on the driver's connection, past SQLAlchemy's per-row work.

In `tickwork up` one writer thread runs every write, sharing the GIL with the event loop
that serves the API and runs the tasks. Through SQLAlchemy Core a claim or a completion
spent most of its time outside SQLite: per row, parameter dicts built and processed, an
expanding ``IN`` compiled, results wrapped in mappings (bench/README.md, "Embedded mode:
the writer's hot statements"). Here the same statements are plain SQL text, cached, run on
the same connection inside the same transaction, and values are converted by the very
processors SQLAlchemy would use (the columns' types), so what is stored is identical.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import Connection

Convert = Callable[[Any], Any]
F = TypeVar("F", bound=Callable[..., Any])
_DIALECT = SQLiteDialect_pysqlite()


def translated(method: F) -> F:
    """Raise the driver's errors as SQLAlchemy's (``IntegrityError``, ``OperationalError``, …),
    as if the statement had gone through SQLAlchemy: the store maps those to its own."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            raise sa.exc.DBAPIError.instance(
                None, None, exc, sqlite3.Error, dialect=_DIALECT
            ) from exc

    return call  # type: ignore[return-value]


def driver(conn: Connection) -> sqlite3.Connection:
    """The sqlite3 connection under ``conn`` (its transaction is the one in progress)."""
    raw: sqlite3.Connection = conn.connection.driver_connection  # type: ignore[assignment]
    return raw


@functools.cache
def binders(table: sa.Table, columns: tuple[str, ...]) -> tuple[tuple[int, Convert], ...]:
    """(position, converter) of the columns whose values SQLAlchemy would convert."""
    found = []
    for i, name in enumerate(columns):
        bind = table.c[name].type.dialect_impl(_DIALECT).bind_processor(_DIALECT)
        if bind is not None:
            found.append((i, bind))
    return tuple(found)


@functools.cache
def readers(table: sa.Table, columns: tuple[str, ...]) -> tuple[tuple[int, Convert], ...]:
    """(position, converter) of the columns whose stored values SQLAlchemy would convert
    (a name that is not a column of ``table``, a computed value, is left as read)."""
    found = []
    for i, name in enumerate(columns):
        if name not in table.c:
            continue
        read = table.c[name].type.dialect_impl(_DIALECT).result_processor(_DIALECT, None)
        if read is not None:
            found.append((i, read))
    return tuple(found)


def bound(table: sa.Table, columns: tuple[str, ...], row: Sequence[Any]) -> list[Any]:
    """``row`` (values in ``columns`` order) as the driver's parameters."""
    values = list(row)
    for i, convert in binders(table, columns):
        values[i] = convert(values[i])
    return values


def decoded(
    table: sa.Table, columns: tuple[str, ...], rows: Iterable[Sequence[Any]]
) -> list[dict[str, Any]]:
    """Stored rows (in ``columns`` order) as dicts of Python values, as SQLAlchemy reads them.

    Each distinct stored value of a column is converted once per call (as ``bound_rows``
    binds): the task runs of a claim batch share their timestamps, and an enqueue's copies
    their JSON too, and a timestamp's parse or a JSON decode costs far more than a lookup.
    The rows then share the decoded objects: records hold them, nothing mutates them.
    """
    convert = readers(table, columns)
    done: dict[tuple[int, Any], Any] = {}
    out = []
    for row in rows:
        values = list(row)
        for i, read in convert:
            key = (i, values[i])
            if (value := done.get(key, done)) is done:
                value = done[key] = read(values[i])
            values[i] = value
        out.append(dict(zip(columns, values, strict=True)))
    return out


@functools.cache
def insert_sql(table: sa.Table, columns: tuple[str, ...]) -> str:
    names = ", ".join(columns)
    return f"INSERT INTO {table.name} ({names}) VALUES ({', '.join('?' * len(columns))})"


def bound_rows(
    table: sa.Table, columns: tuple[str, ...], rows: Sequence[Sequence[Any]]
) -> list[list[Any]]:
    """``bound`` of every row, each distinct object converted once: the rows of a batch
    share most of their values (an enqueue's copies hold the same timestamps, and often the
    same config), and a timestamp's text or a dict's JSON costs far more than a lookup."""
    convert = binders(table, columns)
    done: dict[tuple[int, int], Any] = {}  # (position, id(value)): the rows keep them alive
    out = []
    for row in rows:
        values = list(row)
        for i, to_driver in convert:
            value = values[i]
            key = (i, id(value))
            if (stored := done.get(key, done)) is done:
                stored = done[key] = to_driver(value)
            values[i] = stored
        out.append(values)
    return out


@translated
def insert_rows(
    conn: Connection, table: sa.Table, columns: tuple[str, ...], rows: Sequence[Sequence[Any]]
) -> None:
    """``INSERT`` every row (values in ``columns`` order) in one ``executemany``."""
    if rows:
        driver(conn).executemany(insert_sql(table, columns), bound_rows(table, columns, rows))


def marks(n: int) -> str:
    """``?, ?, …`` for ``n`` parameters."""
    return ", ".join("?" * n)


_LIVE = ("id", "updated_at")


@translated
def live_versions(conn: Connection, jobs: sa.Table, ids: Sequence[str]) -> dict[str, Any]:
    """``updated_at`` of each job of ``ids`` that is not deleted (an enqueue's check that the
    job it was planned from is still the live one), as SQLAlchemy would read it: through
    SQLAlchemy's select with an expanding ``IN`` this cost ~580 µs a call, here ~40 µs
    (bench/README.md, "a lone run in embedded mode")."""
    where = f"id IN ({marks(len(ids))}) AND deleted_at IS NULL"
    sql = f"SELECT id, updated_at FROM {jobs.name} WHERE {where}"
    rows = driver(conn).execute(sql, list(ids)).fetchall()
    return {row["id"]: row["updated_at"] for row in decoded(jobs, _LIVE, rows)}
