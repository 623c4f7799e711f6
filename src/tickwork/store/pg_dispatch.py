"""Claim, heartbeat and completion on PostgreSQL, through psycopg directly (the
``PostgresDialect``'s hot statements; ``dispatch`` holds what they mean).

The worker's two hot transactions, written as constant statement text with array parameters
(``unnest``/``ANY``) instead of SQLAlchemy Core with ``(id, attempt) IN (…)`` lists: the text
never changes with the batch size, so psycopg prepares each statement on a connection after
a few uses (``prepare_threshold``), and no SQLAlchemy compile, parameter or result layer runs
per row. They execute on the SQLAlchemy connection's own driver connection, inside the
store's transaction, so a fence check or the DAG's readiness commit or roll back with them.

Every write is conditional on the state (``queued`` for a claim, ``running`` for an outcome)
and on the attempt, so a duplicate, stale or forged message changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import RetryPolicy, TaskKind, TaskRun, TaskRunState, TriggerRule
from tickwork.ports import Beat, TaskKey
from tickwork.store.columns import UTCDateTime
from tickwork.store.completion import COMPLETED_COLUMNS, LOCKED
from tickwork.store.rows import TASK_RUN_COLUMNS, callbacks_from_json, retry_from_json
from tickwork.store.schema import task_runs

#: The stored columns of a task run; JSON ones as text, decoded here (``_decoder``).
_COLUMNS = ", ".join(
    f"t.{name}::text" if isinstance(task_runs.c[name].type, sa.JSON) else f"t.{name}"
    for name in TASK_RUN_COLUMNS
)


def _keyed(where: str, lock: str = "FOR UPDATE") -> str:
    """The ids of the task runs keyed by ``ids``/``attempts`` that match ``where``, each
    locked (``lock``) in id order, one primary-key lookup per key.

    In id order, as completion locks them, so no two transactions wait on each other in a
    circle. (``UPDATE … FROM unnest(…)`` locked them in the order of the join: under load, a
    heartbeat and a completion deadlocked, each holding a row the other wanted, and one of
    them was rolled back after a second.) The keys are sorted and each row is locked inside
    its own lateral lookup, which PostgreSQL cannot flatten into a join (it holds a
    ``FOR UPDATE``): so the plan is a loop over the sorted keys at any table size. As a
    join, a generic plan made while the table was small walked its whole primary key in
    order instead, to save the sort (2,000 buffers to lock one row at 4,200 task runs)."""
    return f"""
    SELECT t.id
    FROM (SELECT * FROM unnest(%(ids)s::text[], %(attempts)s::int[]) AS k(id, attempt)
          ORDER BY k.id) AS k
    CROSS JOIN LATERAL (
        SELECT t.id FROM task_runs AS t
        WHERE t.id = k.id AND t.attempt = k.attempt AND {where}
        {lock}
    ) AS t"""


# A run holding a running task run is running, whatever its other task runs do
# (``derive_run_state``), so the claim reads no siblings. ``= ANY`` of an array walks the
# primary key in key order, so two claims lock shared runs in the same order.
_CLAIM = f"""
WITH locked AS ({_keyed("t.state = %(queued)s")}
), won AS (
    UPDATE task_runs AS t
    SET state = 'running', worker_id = %(worker)s, started_at = %(now)s, heartbeat_at = %(now)s
    FROM locked
    WHERE t.id = locked.id AND t.state = %(queued)s
    RETURNING {_COLUMNS}
), running AS (
    UPDATE runs
    SET state = 'running', started_at = coalesce(runs.started_at, %(now)s), finished_at = NULL
    WHERE runs.id = ANY(ARRAY(SELECT run_id FROM won))
)
SELECT * FROM won
"""

#: A heartbeat skips a row another transaction holds (its completion, a cancel request): it
#: never waits, so it is in no one's way, and the next beat stamps the row if it still runs.
#: A key that no longer matches a running row of this worker (read without a lock, so a
#: skipped row still counts as held) comes back as abandoned: the reaper took it.
_HEARTBEAT = f"""
WITH locked AS (
    {_keyed("t.state = %(running)s AND t.worker_id = %(worker)s", "FOR UPDATE SKIP LOCKED")}
), beat AS (
    UPDATE task_runs AS t
    SET heartbeat_at = %(now)s,
        started_at = CASE WHEN t.id = ANY(%(held)s::text[]) THEN NULL ELSE t.started_at END
    FROM locked
    WHERE t.id = locked.id
    RETURNING t.id, t.attempt, t.cancel_requested
)
SELECT id, attempt, cancel_requested, false FROM beat
UNION ALL
SELECT k.id, k.attempt, false, true
FROM unnest(%(ids)s::text[], %(attempts)s::int[]) AS k(id, attempt)
WHERE NOT EXISTS (
    SELECT 1 FROM task_runs AS t
    WHERE t.id = k.id AND t.attempt = k.attempt AND t.state = %(running)s
      AND t.worker_id = %(worker)s
)
"""

#: A held task run about to run, still this worker's (``Store.start``): one statement, its rows
#: locked in id order like every statement here.
_START = f"""
WITH locked AS ({_keyed("t.state = %(running)s AND t.worker_id = %(worker)s")}
)
UPDATE task_runs AS t
SET started_at = %(now)s, heartbeat_at = %(now)s
FROM locked
WHERE t.id = locked.id
RETURNING t.id, t.attempt
"""

#: The state each statement requires, sent as parameters rather than written as literals, so
#: a prepared statement's generic plan cannot use the partial per-state indexes
#: (``ix_task_runs_queued``/``_running``): with statistics that lag the churn (fresh partitions,
#: autovacuum behind or off) the planner takes such an index for tiny, while it still holds an
#: entry for every row that has passed through the state since the last vacuum — 20,000 rows
#: read to claim one, measured 3 ms against 0.1 ms. Matching by primary key never degrades.
STATES = {"queued": "queued", "running": "running"}

#: Locks the rows first (in id order) so the attempt history matches exactly the updates
#: applied; ``siblings`` = 1 means the run's state follows from the outcome alone.
_LOCK = f"""
SELECT {", ".join("t." + name for name in LOCKED)},
       (SELECT count(*) FROM task_runs AS s WHERE s.run_id = t.run_id) AS siblings
FROM task_runs AS t
JOIN unnest(%(ids)s::text[], %(attempts)s::int[]) AS k(id, attempt)
  ON t.id = k.id AND t.attempt = k.attempt
WHERE t.state = %(running)s
ORDER BY t.id
FOR UPDATE OF t
"""

#: All outcomes of a batch, their attempt history and the runs of single-task runs: one
#: statement. Every row was locked by ``_LOCK`` in this transaction, so each write applies.
_COMPLETE = """
WITH v AS (
    SELECT * FROM unnest(
        %(key_id)s::text[], %(key_attempt)s::int[], %(state)s::text[], %(attempt)s::int[],
        %(due_at)s::timestamptz[], %(started_at)s::timestamptz[],
        %(finished_at)s::timestamptz[], %(heartbeat_at)s::timestamptz[], %(worker_id)s::text[],
        %(error)s::text[], %(exit_code)s::int[], %(result)s::text[]
    ) AS v(id, key_attempt, state, attempt, due_at, started_at, finished_at, heartbeat_at,
           worker_id, error, exit_code, result)
), done AS (
    UPDATE task_runs AS t
    SET state = v.state, attempt = v.attempt, due_at = v.due_at, started_at = v.started_at,
        finished_at = v.finished_at, heartbeat_at = v.heartbeat_at, worker_id = v.worker_id,
        error = v.error, exit_code = v.exit_code, result = v.result
    FROM v
    WHERE t.id = v.id AND t.attempt = v.key_attempt AND t.state = %(running)s
), history AS (
    INSERT INTO attempts
        (task_run_id, attempt, state, started_at, finished_at, error, exit_code, worker_id)
    SELECT * FROM unnest(
        %(a_task_run_id)s::text[], %(a_attempt)s::int[], %(a_state)s::text[],
        %(a_started_at)s::timestamptz[], %(a_finished_at)s::timestamptz[], %(a_error)s::text[],
        %(a_exit_code)s::int[], %(a_worker_id)s::text[]
    )
), alone AS (
    UPDATE runs AS r
    SET state = s.state, started_at = coalesce(r.started_at, s.started_at),
        finished_at = s.finished_at
    FROM unnest(
        %(r_key_id)s::text[], %(r_state)s::text[], %(r_started_at)s::timestamptz[],
        %(r_finished_at)s::timestamptz[]
    ) AS s(id, state, started_at, finished_at)
    WHERE r.id = s.id
)
SELECT 1
"""
_OUTCOME = ("key_id", "key_attempt", *COMPLETED_COLUMNS)
_HISTORY = ("task_run_id", "attempt", "state", "started_at", "finished_at", "error",
            "exit_code", "worker_id")  # fmt: skip
_RUN = ("key_id", "state", "started_at", "finished_at")


@contextmanager
def _driver(conn: Connection) -> Iterator[psycopg.Cursor[Any]]:
    """A cursor on the connection's psycopg connection; driver errors surface as
    SQLAlchemy's, as they would from ``conn.execute`` (the store maps those at its edge)."""
    raw = conn.connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    try:
        with raw.cursor() as cursor:
            yield cursor
    except psycopg.Error as exc:
        if raw.broken or raw.closed:
            conn.invalidate(exc)
        raise sa.exc.DBAPIError.instance(
            None, None, exc, psycopg.Error, connection_invalidated=raw.broken or raw.closed
        ) from exc


def claim_statement(
    keys: Sequence[TaskKey], worker_id: str, now: datetime
) -> tuple[str, dict[str, Any]]:
    """The claim statement and its parameters (for ``claim``, and a plan test)."""
    return _CLAIM, {**_key_arrays(keys), "worker": worker_id, "now": now}


def claim(
    conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
) -> list[TaskRun]:
    with _driver(conn) as cursor:
        cursor.execute(*claim_statement(keys, worker_id, now))
        return claimed(names(cursor), cursor.fetchall())


def claimed(columns: tuple[str, ...], rows: Sequence[Sequence[Any]]) -> list[TaskRun]:
    """The claim statement's rows as task runs (``columns``: ``names(cursor)``)."""
    decode = _task_run_decoder(columns)
    return [decode(row) for row in rows]


def heartbeat_statement(
    keys: Sequence[TaskKey], worker_id: str, now: datetime, held: Sequence[TaskKey] = ()
) -> tuple[str, dict[str, Any]]:
    held_ids = _array(task_run_id for task_run_id, _ in held)
    return _HEARTBEAT, {**_key_arrays(keys), "worker": worker_id, "now": now, "held": held_ids}


def heartbeat(
    conn: Connection,
    keys: Sequence[TaskKey],
    worker_id: str,
    now: datetime,
    held: Sequence[TaskKey],
) -> Beat:
    with _driver(conn) as cursor:
        return beat_of(cursor.execute(*heartbeat_statement(keys, worker_id, now, held)))


def beat_of(rows: Iterable[Sequence[Any]]) -> Beat:
    """The heartbeat statement's rows as its ``Beat``."""
    beat = Beat()
    for task_run_id, attempt, cancel, gone in rows:
        if gone:
            beat.abandoned.add((task_run_id, attempt))
        elif cancel:
            beat.cancelled.add(task_run_id)
    return beat


def start_statement(
    keys: Sequence[TaskKey], worker_id: str, now: datetime
) -> tuple[str, dict[str, Any]]:
    return _START, {**_key_arrays(keys), "worker": worker_id, "now": now}


def start(conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[TaskKey]:
    with _driver(conn) as cursor:
        return {(row[0], row[1]) for row in cursor.execute(*start_statement(keys, worker_id, now))}


def lock_statement(keys: Sequence[TaskKey]) -> tuple[str, dict[str, Any]]:
    return _LOCK, _key_arrays(keys)


def lock_running(conn: Connection, keys: Sequence[TaskKey]) -> list[dict[str, Any]]:
    with _driver(conn) as cursor:
        cursor.execute(*lock_statement(keys))
        return locked(names(cursor), cursor.fetchall())


def locked(columns: tuple[str, ...], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """The lock statement's rows, as dicts by column name."""
    decode = _decoder(columns)
    return [decode(row) for row in rows]


def write_outcomes(
    conn: Connection,
    completed: Sequence[dict[str, Any]],
    history: Sequence[dict[str, Any]],
    alone: Sequence[dict[str, Any]],
) -> None:
    with _driver(conn) as cursor:
        cursor.execute(*outcomes_statement(completed, history, alone))


def outcomes_statement(
    completed: Sequence[dict[str, Any]],
    history: Sequence[dict[str, Any]],
    alone: Sequence[dict[str, Any]],
) -> tuple[str, dict[str, Any]]:
    """The statement writing a ``CompletionPlan``'s values, and its parameters."""
    params = arrays("", _OUTCOME, completed) | arrays("a_", _HISTORY, history)
    return _COMPLETE, params | arrays("r_", _RUN, alone) | STATES


def arrays(prefix: str, names: Sequence[str], rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """One array parameter per column name, ``prefix`` + name."""
    return {f"{prefix}{name}": _array(r[name] for r in rows) for name in names}


def _key_arrays(keys: Sequence[TaskKey]) -> dict[str, str]:
    return {"ids": _array(k[0] for k in keys), "attempts": _array(k[1] for k in keys), **STATES}


def _array(values: Iterable[str | int | datetime | None]) -> str:
    """A PostgreSQL array literal, cast in the statement (``%s::text[]``): one string to
    send, instead of psycopg dumping a list element by element in Python (which was the
    largest single cost of these statements in the worker)."""
    return "{" + ",".join(map(_element, values)) + "}"


def _element(value: str | int | datetime | None) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


# -- decoding, by column name ----------------------------------------------------------


def names(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> tuple[str, ...]:
    """The column names of the cursor's last result."""
    return tuple(c.name for c in cursor.description or ())


def _utc(value: datetime | None) -> datetime | None:
    return value if value is None or value.tzinfo is UTC else value.astimezone(UTC)


# Retry policies, upstream lists and callbacks repeat across a batch's rows (they come from
# one job); decoded once per distinct text. Configs are per run, so decoded every time.
@lru_cache(maxsize=512)
def _retry(text: str) -> RetryPolicy:
    return retry_from_json(json.loads(text))


@lru_cache(maxsize=512)
def _upstream(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


def _callbacks(text: str | None) -> Any:
    return callbacks_from_json(None if text is None else json.loads(text))


#: How a value of each task-run column the statements return is decoded (JSON columns come
#: as text); a column not named here is taken as the driver returns it.
_BY_NAME: dict[str, Callable[[Any], Any]] = {
    "kind": TaskKind,
    "config": json.loads,
    "state": TaskRunState,
    "retry": _retry,
    "upstream": _upstream,
    "trigger_rule": TriggerRule,
    "callbacks": _callbacks,
    **{c.name: _utc for c in task_runs.c if isinstance(c.type, UTCDateTime)},
}


def _keep(value: Any) -> Any:
    return value


@cache
def _task_run_decoder(names: tuple[str, ...]) -> Callable[[Sequence[Any]], TaskRun]:
    """Decodes a row of the columns ``names`` into a ``TaskRun``: each field is found by its
    column name (once per statement, here), then read by position, row after row."""
    at = [names.index(field) for field in TASK_RUN_COLUMNS]
    steps = [(i, _BY_NAME.get(names[i])) for i in at]

    def decode(row: Sequence[Any]) -> TaskRun:
        return TaskRun(*[row[i] if f is None else f(row[i]) for i, f in steps])

    return decode


@cache
def _decoder(names: tuple[str, ...]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """Decodes a row of the columns ``names`` into a dict by column name."""
    decoders = [(name, _BY_NAME.get(name, _keep)) for name in names]

    def decode(row: Sequence[Any]) -> dict[str, Any]:
        return {name: f(value) for (name, f), value in zip(decoders, row, strict=True)}

    return decode
