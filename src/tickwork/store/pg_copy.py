"""Bulk inserts on PostgreSQL: ``COPY … FROM STDIN`` (``PostgresDialect.bulk_insert``).

Rows are tuples in the order of ``columns``, holding the values the table's SQLAlchemy types
take (aware datetimes, plain dicts and lists for JSON columns). On PostgreSQL they are
streamed with psycopg 3's ``Cursor.copy`` on the driver connection under the SQLAlchemy
connection, so the rows are part of the caller's transaction (an idempotency key recorded
just before commits with them or not at all). ``COPY`` costs a fraction of an executemany
per row: no statement per row, and psycopg adapts the values in C. JSON values are written
as JSON text, each distinct object dumped once (the task runs of a batch share most of them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.store.run_rows import Row


def copy_rows(
    conn: Connection, table: sa.Table, columns: Sequence[str], rows: Sequence[Row]
) -> None:
    """Insert ``rows`` (tuples in ``columns`` order) into ``table`` in the open transaction."""
    json_at = [i for i, name in enumerate(columns) if isinstance(table.c[name].type, sa.JSON)]
    dumped: dict[int, str] = {}

    def as_json(value: Any) -> str | None:
        if value is None:
            return None
        text = dumped.get(id(value))
        if text is None:
            text = dumped[id(value)] = json.dumps(value, separators=(",", ":"))
        return text

    names = ", ".join(f'"{name}"' for name in columns)
    statement = f'COPY "{table.name}" ({names}) FROM STDIN'
    driver = conn.connection.driver_connection
    assert driver is not None
    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            _write(copy, rows, json_at, as_json)
    except psycopg.Error as exc:
        # As SQLAlchemy would have raised it (IntegrityError, OperationalError, ...), so the
        # store maps it like any other statement's error.
        raise sa.exc.DBAPIError.instance(statement, None, exc, psycopg.Error) from exc


def _write(
    copy: psycopg.Copy, rows: Sequence[Row], json_at: list[int], as_json: Callable[[Any], Any]
) -> None:
    for row in rows:
        if json_at:
            values = list(row)
            for i in json_at:
                values[i] = as_json(values[i])
            copy.write_row(values)
        else:
            copy.write_row(row)
