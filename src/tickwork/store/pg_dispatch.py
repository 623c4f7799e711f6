"""Claim, heartbeat and completion on PostgreSQL, through psycopg directly.

The worker's two hot transactions, written as constant statement text with array parameters
(``unnest``/``ANY``) instead of SQLAlchemy Core with ``(id, attempt) IN (…)`` lists: the text
never changes with the batch size, so psycopg prepares each statement on a connection after
a few uses (``prepare_threshold``), and no SQLAlchemy compile, parameter or result layer runs
per row. They execute on the SQLAlchemy connection's own driver connection, inside the
store's transaction, so a fence check or the DAG's readiness (still SQLAlchemy, see
``dispatch``) commit or roll back with them. SQLite keeps ``dispatch``'s Core statements.

Same guarantees as ``dispatch.claim`` and ``dispatch.complete``: every write is conditional
on the state (``queued`` for a claim, ``running`` for an outcome) and on the attempt, so a
duplicate, stale or forged message changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import Outcome, RetryPolicy, TaskKind, TaskRun, TaskRunState, TriggerRule
from tickwork.ports import Completion, TaskKey
from tickwork.store import dispatch
from tickwork.store.rows import callbacks_from_json, retry_from_json
from tickwork.store.runs import refresh_runs

#: The stored columns of a task run, in ``TaskRun``'s order; JSON ones as text, decoded here.
_COLUMNS = (
    "id, run_id, job_id, job_name, task_name, kind, config::text, state, attempt, retry::text,"
    " due_at, logical_date, timeout, queue, priority, upstream::text, queued_at, started_at,"
    " finished_at, heartbeat_at, worker_id, error, exit_code, cancel_requested, trigger_rule,"
    " pool, pool_slots, depends_on_past, callbacks::text, result"
)

# A run holding a running task run is running, whatever its other task runs do
# (``derive_run_state``), so the claim reads no siblings. ``= ANY`` of an array walks the
# primary key in key order, so two claims lock shared runs in the same order.
_CLAIM = f"""
WITH won AS (
    UPDATE task_runs AS t
    SET state = 'running', worker_id = %(worker)s, started_at = %(now)s, heartbeat_at = %(now)s
    FROM unnest(%(ids)s::text[], %(attempts)s::int[]) AS k(id, attempt)
    WHERE t.id = k.id AND t.attempt = k.attempt AND t.state = %(queued)s
    RETURNING {", ".join("t." + c for c in _COLUMNS.split(", "))}
), running AS (
    UPDATE runs
    SET state = 'running', started_at = coalesce(runs.started_at, %(now)s), finished_at = NULL
    WHERE runs.id = ANY(ARRAY(SELECT run_id FROM won))
)
SELECT * FROM won
"""

_HEARTBEAT = """
UPDATE task_runs AS t
SET heartbeat_at = %(now)s
FROM unnest(%(ids)s::text[], %(attempts)s::int[]) AS k(id, attempt)
WHERE t.id = k.id AND t.attempt = k.attempt AND t.state = %(running)s AND t.worker_id = %(worker)s
RETURNING t.id, t.cancel_requested
"""

#: The state each statement requires, sent as parameters rather than written as literals, so
#: a prepared statement's generic plan cannot use the partial per-state indexes
#: (``ix_task_runs_queued``/``_running``): with statistics that lag the churn (fresh partitions,
#: autovacuum behind or off) the planner takes such an index for tiny, while it still holds an
#: entry for every row that has passed through the state since the last vacuum — 20,000 rows
#: read to claim one, measured 3 ms against 0.1 ms. Matching by primary key never degrades.
_STATES = {"queued": "queued", "running": "running"}

#: Locks the rows first (in id order) so the attempt history matches exactly the updates
#: applied; ``siblings`` = 1 means the run's state follows from the outcome alone.
_LOCK = """
SELECT t.id, t.attempt, t.run_id, t.due_at, t.started_at, t.heartbeat_at, t.worker_id, t.pool,
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
        %(id)s::text[], %(key_attempt)s::int[], %(state)s::text[], %(attempt)s::int[],
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
        %(id)s::text[], %(key_attempt)s::int[], %(state)s::text[],
        %(a_started_at)s::timestamptz[], %(a_finished_at)s::timestamptz[], %(error)s::text[],
        %(exit_code)s::int[], %(a_worker_id)s::text[]
    )
), alone AS (
    UPDATE runs AS r
    SET state = s.state, started_at = coalesce(r.started_at, s.started_at),
        finished_at = s.finished_at
    FROM unnest(
        %(r_id)s::text[], %(r_state)s::text[], %(r_started_at)s::timestamptz[],
        %(r_finished_at)s::timestamptz[]
    ) AS s(id, state, started_at, finished_at)
    WHERE r.id = s.id
)
SELECT 1
"""


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


def claim(
    conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime
) -> list[TaskRun]:
    params = {**_key_arrays(keys), "worker": worker_id, "now": now}
    with _driver(conn) as cursor:
        won = [_task_run(row) for row in cursor.execute(_CLAIM, params)]
    return dispatch.with_inputs(conn, won)


def heartbeat(conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[str]:
    params = {**_key_arrays(keys), "worker": worker_id, "now": now}
    with _driver(conn) as cursor:
        return {task_run_id for task_run_id, cancel in cursor.execute(_HEARTBEAT, params) if cancel}


def complete(conn: Connection, outcomes: Sequence[Outcome]) -> Completion:
    by_key = dispatch.outcomes_by_key(outcomes)
    keys = list(by_key)
    with _driver(conn) as cursor:
        cursor.execute(_LOCK, _key_arrays(keys))
        applied = [(row, by_key[(row["id"], row["attempt"])]) for row in _dicts(cursor)]
        if not applied:
            return Completion(applied=[])
        cursor.execute(_COMPLETE, _complete_params(applied))
    finished = max(o.finished_at for _, o in applied)
    family = [row["run_id"] for row, _ in applied if row["siblings"] != 1]
    ready = refresh_runs(conn, family, finished)
    queued = dispatch.queue_ready(conn, ready, finished)
    return Completion(
        applied=[row["id"] for row, _ in applied],
        queued=queued,
        waiting=len(ready) - len(queued),
        pools_freed=any(row["pool"] is not None for row, _ in applied),
    )


def _dicts(cursor: psycopg.Cursor[Any]) -> list[dict[str, Any]]:
    names = [c.name for c in cursor.description or ()]
    return [
        {n: _utc(v) if isinstance(v, datetime) else v for n, v in zip(names, row, strict=True)}
        for row in cursor.fetchall()
    ]


def _complete_params(applied: Sequence[tuple[Mapping[str, Any], Outcome]]) -> dict[str, Any]:
    rows = [dispatch.completion_values(row, o) for row, o in applied]
    history = [dispatch.attempt_values(row, o) for row, o in applied]
    alone = [dispatch.single_run_values(row, o) for row, o in applied if row["siblings"] == 1]
    params = {name: _array(r[f"p_{name}"] for r in rows) for name in _COMPLETED}
    params.update(
        id=_array(r["p_key_id"] for r in rows), key_attempt=_array(r["p_key_attempt"] for r in rows)
    )
    params.update({f"a_{name}": _array(h[name] for h in history) for name in _HISTORY_ONLY})
    params.update({f"r_{name}": _array(a[f"p_{name}"] for a in alone) for name in _RUN})
    params["r_id"] = _array(a["p_key_id"] for a in alone)
    return params | _STATES


def _key_arrays(keys: Sequence[TaskKey]) -> dict[str, str]:
    return {"ids": _array(k[0] for k in keys), "attempts": _array(k[1] for k in keys), **_STATES}


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


_COMPLETED = dispatch.COMPLETED_COLUMNS
#: Where an attempt's history differs from the task run's new values (a retry's fields
#: describe the attempt to come).
_HISTORY_ONLY = ("started_at", "finished_at", "worker_id")
_RUN = ("state", "started_at", "finished_at")


# -- decoding --------------------------------------------------------------------------


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _maybe_utc(value: datetime | None) -> datetime | None:
    return None if value is None else _utc(value)


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


_TS = frozenset({10, 11, 16, 17, 18, 19})  # the positions of timestamps in ``_COLUMNS``
_DECODE: dict[int, Callable[[Any], Any]] = {
    5: TaskKind,
    6: json.loads,
    7: TaskRunState,
    9: _retry,
    15: _upstream,
    24: TriggerRule,
    28: _callbacks,
    **dict.fromkeys(_TS, _maybe_utc),
}


def _task_run(row: Sequence[Any]) -> TaskRun:
    return TaskRun(*(_DECODE[i](v) if i in _DECODE else v for i, v in enumerate(row)))
