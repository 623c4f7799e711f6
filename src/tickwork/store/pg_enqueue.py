"""A few enqueued runs on PostgreSQL in one statement (the single-enqueue path).

``COPY`` is the cheapest way to insert many rows, but each ``COPY`` costs two round trips
(start, then end), and a guarded insert of one run was a check ``SELECT`` and two ``COPY``s:
five round trips inside the transaction, each paid in CPU by the API process (psycopg's
wait, the socket, SQLAlchemy's execution context) and by the server. For a few runs, one
``INSERT`` with a data-modifying CTE does it all: the runs are inserted only if the job they
were planned from is still the live one, their task runs only if the runs were, and the
number of task-run rows says which happened. The statement text depends only on how many
runs and task runs it carries, so psycopg prepares it on the server after a few uses.

Values go as they go to ``COPY`` (``bulk``): JSON columns as JSON text, everything else as
psycopg adapts it, each placeholder cast to its column's type (strings to ``text``, never to
``varchar(n)``, which would cut an over-long value instead of refusing it).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tickwork.core.model import Job
from tickwork.store.run_rows import RUN_COLUMNS, TASK_RUN_COLUMNS, Row, RunRows
from tickwork.store.schema import jobs, runs, task_runs

#: Up to this many task-run rows go in one statement; more go by ``COPY``.
MAX_ROWS = 32
#: Up to this many task-run rows of a group of enqueues (``group_statement``) go in one.
MAX_GROUP_ROWS = 256
_DIALECT = postgresql.dialect()  # type: ignore[no-untyped-call]


def fits(rows: RunRows) -> bool:
    """Whether ``rows`` go in one statement (else by ``COPY``)."""
    return 0 < len(rows.task_runs) <= MAX_ROWS


def statement(
    rows: RunRows,
    planned_from: Job | None,
    *,
    schema: str | None = None,
    notify: str | None = None,
) -> tuple[str, tuple[Any, ...]]:
    """The guarded ``INSERT`` of ``rows`` and its parameters; ``schema``: the schema of the
    tables (default: the ``search_path``'s); ``notify``: a channel the same statement notifies
    (once the task runs are in; PostgreSQL delivers it on commit), saving a round trip."""
    sql = _statement(
        len(rows.runs), len(rows.task_runs), planned_from is not None, schema, notify is not None
    )
    params: list[Any] = [notify] if notify is not None else []  # in the placeholders' order
    _extend(params, runs, RUN_COLUMNS, rows.runs)
    if planned_from is not None:
        params += [planned_from.id, planned_from.updated_at]
    _extend(params, task_runs, TASK_RUN_COLUMNS, rows.task_runs)
    return sql, tuple(params)


def group_statement(rows: RunRows, planned: Sequence[datetime]) -> tuple[str, tuple[Any, ...]]:
    """The ``INSERT`` of the runs of several independent enqueues (``Store.enqueue_each``):
    each run (``rows.runs[i]``) goes in only if its job is still the version it was planned
    from (``planned[i]``, that job's ``updated_at``), and its task runs only with it. The
    statement returns one row per run inserted: its id and how many task runs went in (all
    of the statement's).

    Its placeholders are PostgreSQL's own (``$1``, ``$2``, ...), for a raw cursor
    (``DirectWriter.fetch``): psycopg converts ``%s`` placeholders by parsing the statement's
    text, and caches that only for statements of up to 50 parameters (one run, one task run),
    so a group of 16 runs (~650 parameters) cost ~3 ms of the API's CPU per statement in
    parsing alone (the group's whole statement ~5 ms against ~2 ms raw, bench/README.md)."""
    sql = _group_statement(len(rows.runs), len(rows.task_runs))
    params: list[Any] = []
    _extend(params, runs, RUN_COLUMNS, rows.runs, planned)
    _extend(params, task_runs, TASK_RUN_COLUMNS, rows.task_runs)
    return sql, tuple(params)


def fits_group(rows: RunRows) -> bool:
    """Whether the rows of a group go in one ``group_statement``."""
    return 0 < len(rows.task_runs) <= MAX_GROUP_ROWS


def _extend(
    params: list[Any],
    table: sa.Table,
    columns: Sequence[str],
    rows: Sequence[Row],
    last: Sequence[Any] | None = None,
) -> None:
    """Append the values of ``rows`` (and after each row's, ``last[i]`` if given)."""
    json_at = _json_columns(table.name, tuple(columns))
    dumped: dict[int, str] = {}  # the task runs of a job share most JSON values
    for n, row in enumerate(rows):
        if not json_at:
            params.extend(row)
        else:
            values = list(row)
            for i in json_at:
                value = values[i]
                if value is not None:
                    text = dumped.get(id(value))
                    if text is None:
                        text = dumped[id(value)] = json.dumps(value, separators=(",", ":"))
                    values[i] = text
            params.extend(values)
        if last is not None:
            params.append(last[n])


@cache
def _json_columns(table: str, columns: tuple[str, ...]) -> tuple[int, ...]:
    t = runs if table == runs.name else task_runs
    return tuple(i for i, name in enumerate(columns) if isinstance(t.c[name].type, sa.JSON))


def qualified(schema: str | None, table: str) -> str:
    """``table`` in ``schema`` (quoted), or as the ``search_path`` finds it (None)."""
    return table if schema is None else '"' + schema.replace('"', '""') + '".' + table


@cache
def _statement(
    n_runs: int, n_task_runs: int, guarded: bool, schema: str | None = None, notify: bool = False
) -> str:
    live = (
        f"WHERE EXISTS (SELECT 1 FROM {qualified(schema, jobs.name)} WHERE id = %s "
        "AND updated_at = %s AND deleted_at IS NULL) "
        if guarded
        else ""
    )
    return (
        ("WITH n AS (SELECT pg_notify(%s, '')), " if notify else "WITH ")
        + f"r AS (INSERT INTO {qualified(schema, runs.name)} ({_names(RUN_COLUMNS)}) "
        f"SELECT * FROM (VALUES {_values(runs, RUN_COLUMNS, n_runs)}) AS v "
        f"{live}RETURNING 1) "
        f"INSERT INTO {qualified(schema, task_runs.name)} ({_names(TASK_RUN_COLUMNS)}) "
        f"SELECT * FROM (VALUES {_values(task_runs, TASK_RUN_COLUMNS, n_task_runs)}) AS v "
        "WHERE EXISTS (SELECT 1 FROM r)" + (" AND EXISTS (SELECT 1 FROM n)" if notify else "")
    )


@cache
def _group_statement(n_runs: int, n_task_runs: int) -> str:
    names = _names(RUN_COLUMNS)
    job = qualified(None, jobs.name)
    sql = (
        f"WITH r AS (INSERT INTO {runs.name} ({names}) SELECT {names} FROM (VALUES "
        f"{_values(runs, RUN_COLUMNS, n_runs, extra='timestamptz')}) AS v({names}, planned_at) "
        f"WHERE EXISTS (SELECT 1 FROM {job} j WHERE j.id = v.job_id "
        "AND j.updated_at = v.planned_at AND j.deleted_at IS NULL) RETURNING id), "
        f"t AS (INSERT INTO {task_runs.name} ({_names(TASK_RUN_COLUMNS)}) SELECT * FROM (VALUES "
        f"{_values(task_runs, TASK_RUN_COLUMNS, n_task_runs)}) AS v({_names(TASK_RUN_COLUMNS)}) "
        "WHERE v.run_id IN (SELECT id FROM r) RETURNING 1) "
        "SELECT id, (SELECT count(*) FROM t) FROM r"
    )
    numbers = itertools.count(1)
    return re.sub("%s", lambda _: f"${next(numbers)}", sql)  # the text holds no other %


def _names(columns: Sequence[str]) -> str:
    return ", ".join(f'"{name}"' for name in columns)


def _values(table: sa.Table, columns: Sequence[str], count: int, extra: str | None = None) -> str:
    casts = [f"%s::{_cast(table.c[name].type)}" for name in columns]
    row = "(" + ", ".join(casts if extra is None else [*casts, f"%s::{extra}"]) + ")"
    return ", ".join([row] * count)


def _cast(column_type: sa.types.TypeEngine[Any]) -> str:
    if isinstance(column_type, sa.JSON):
        return "json"
    if isinstance(column_type, sa.String):  # Text too
        return "text"
    return column_type.compile(dialect=_DIALECT)
