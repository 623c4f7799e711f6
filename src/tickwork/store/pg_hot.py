"""The worker's claim, heartbeat and completion on an asyncio psycopg connection
(``DirectWriter``), on the worker's own event loop; and the scheduler's read of every pass
(``read_planned``), the same way.

At low load, one job at a time, each store call through the engine cost a thread hop each
way (two wake-ups of the worker and a GIL hand-off), a pool checkout and, for a completion,
four round trips (``BEGIN``, lock, write, ``COMMIT``). Here each is one autocommit
statement: claim and heartbeat are ``pg_dispatch``'s own; the completion of runs of one
task run locks, writes the task runs, their attempts and their runs in one statement
(``_COMPLETE_ALONE``), taking from the locked row what ``completion.completion_values`` would
(the outcome's part comes from ``completion.outcome_values``).

A run of several task runs advances its DAG through ``refresh_runs`` (SQLAlchemy, in the
completion's transaction): the statement locks such a task run but writes nothing to it,
and hands its outcome back for ``completion.complete`` on the engine.

Each connection runs these with generic plans (``_generic_plans``). psycopg prepares a
statement after a few uses, but PostgreSQL then plans it afresh with the parameters bound
(a "custom" plan) for as long as that looks cheaper than the generic one, and it does: with
the states bound, the planner takes the partial per-state index (``ix_task_runs_queued`` /
``_running``, which still hold every row that has passed through the state since the last
vacuum) for tiny and walks all of it. Measured with ``auto_explain`` on 1,000 queued task
runs: a claim of one read 1,357 buffers (the whole queued index, twice) plus planning each
time, 0.6-0.9 ms of the backend; with the generic plan 18 buffers (the primary key), 0.13 ms,
and no planning at all. The generic plans match by primary key (``pg_dispatch.STATES``).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

from tickwork.core.model import Outcome, TaskRun
from tickwork.ports import Beat, Completion, TaskKey
from tickwork.store import pg_dispatch
from tickwork.store.completion import outcome_values, outcomes_by_key

Conn = psycopg.AsyncConnection[Any]
_PG = PGDialect_psycopg()  # type: ignore[no-untyped-call]

#: ``completion.outcome_values``'s keys, in the order of ``_COMPLETE_ALONE``'s ``unnest``.
_VALUES = ("id", "attempt", "state", "retry", "due_at", "started_at", "finished_at",
           "worker_id", "error", "exit_code", "result", "run_state", "run_finished_at")  # fmt: skip

#: Locks the running task runs of the outcomes in id order, one lookup each (as
#: ``pg_dispatch._keyed`` does, and for the same reasons), then, for those whose run has
#: no other task run, writes what ``completion.complete`` writes: the task run (a retry's
#: fields describe the attempt to come), its attempt history, its run. Every CTE sees the
#: same snapshot; ``one`` reads the locked rows (the newest versions), so the history is of
#: exactly the rows written. Returns every locked row: id, attempt, siblings, pool.
_COMPLETE_ALONE = """
WITH v AS (
    SELECT * FROM unnest(
        %(id)s::text[], %(attempt)s::int[], %(state)s::text[], %(retry)s::bool[],
        %(due_at)s::timestamptz[], %(started_at)s::timestamptz[],
        %(finished_at)s::timestamptz[], %(worker_id)s::text[], %(error)s::text[],
        %(exit_code)s::int[], %(result)s::text[], %(run_state)s::text[],
        %(run_finished_at)s::timestamptz[]
    ) AS v(id, attempt, state, retry, due_at, started_at, finished_at, worker_id, error,
           exit_code, result, run_state, run_finished_at)
), locked AS (
    SELECT t.id, t.attempt, t.run_id, t.heartbeat_at, t.pool, v.state, v.retry,
           coalesce(v.due_at, t.due_at) AS due_at,
           coalesce(v.started_at, t.started_at) AS started_at, v.finished_at,
           coalesce(v.worker_id, t.worker_id) AS worker_id, v.error, v.exit_code, v.result,
           v.run_state, v.run_finished_at,
           (SELECT count(*) FROM task_runs AS s WHERE s.run_id = t.run_id) AS siblings
    FROM (SELECT * FROM v ORDER BY v.id) AS v
    CROSS JOIN LATERAL (
        SELECT t.id, t.attempt, t.run_id, t.due_at, t.started_at, t.heartbeat_at, t.worker_id,
               t.pool
        FROM task_runs AS t
        WHERE t.id = v.id AND t.attempt = v.attempt AND t.state = %(running)s
        FOR UPDATE
    ) AS t
), one AS (
    SELECT * FROM locked WHERE siblings = 1
), done AS (
    UPDATE task_runs AS t
    SET state = one.state,
        attempt = CASE WHEN one.retry THEN one.attempt + 1 ELSE one.attempt END,
        due_at = one.due_at,
        started_at = CASE WHEN one.retry THEN NULL ELSE one.started_at END,
        finished_at = CASE WHEN one.retry THEN NULL ELSE one.finished_at END,
        heartbeat_at = CASE WHEN one.retry THEN NULL ELSE one.heartbeat_at END,
        worker_id = CASE WHEN one.retry THEN NULL ELSE one.worker_id END,
        error = one.error, exit_code = one.exit_code, result = one.result
    FROM one
    WHERE t.id = one.id AND t.attempt = one.attempt AND t.state = %(running)s
), history AS (
    INSERT INTO attempts
        (task_run_id, attempt, state, started_at, finished_at, error, exit_code, worker_id)
    SELECT id, attempt, state, started_at, finished_at, error, exit_code, worker_id FROM one
), alone AS (
    UPDATE runs AS r
    SET state = one.run_state, started_at = coalesce(r.started_at, one.started_at),
        finished_at = one.run_finished_at
    FROM one
    WHERE r.id = one.run_id
)
SELECT id, attempt, siblings, pool FROM locked
"""


#: Connections whose session already plans generically (``_generic_plans``).
_GENERIC: weakref.WeakSet[Conn] = weakref.WeakSet()


#: The session settings of a connection that runs these statements (``_generic_plans``).
_SESSION = "SELECT " + ", ".join(
    f"set_config('{name}', '{value}', false)"
    for name, value in (
        ("plan_cache_mode", "force_generic_plan"),
        ("enable_seqscan", "off"),
        ("enable_bitmapscan", "off"),
        ("enable_hashjoin", "off"),
        ("enable_mergejoin", "off"),
    )
)


async def _generic_plans(conn: Conn) -> None:
    """Plan this connection's statements once, without their parameters (see the module
    docstring), as nested loops over index scans: one statement per connection, the first
    time it runs one of these.

    A generic plan is made once, for the tables' sizes at that moment, and kept until
    something invalidates it (an ``ANALYZE`` of a table it reads: autovacuum's, when it is on
    and has come by). Made while a partition was empty or small (a fresh database, a new
    month), reading it whole looked cheapest, and stayed so as it grew. Measured in
    ``bench/peers`` with autovacuum off: the claim's ``runs`` update (``= ANY`` of the claimed
    runs) scanned every run of the month, 121 buffers and ~1.5 ms at 3,750 runs; the
    scheduler's ``next_work`` every task run of the month twice a pass, ~1,400 buffers and
    15-20 ms; and with only sequential scans ruled out, the completion's lock merge-joined
    the whole primary key instead (2,450 buffers at 4,200 task runs). Each statement here
    finds its rows by key (an array of ids, a correlated subquery) or through a partial
    per-state index, so the plan wanted is the same at every size: a nested loop of index
    scans, which also locks rows in the index's order (``pg_dispatch``)."""
    if conn not in _GENERIC:
        await conn.execute(_SESSION)
        _GENERIC.add(conn)


async def claim(
    conn: Conn, keys: Sequence[TaskKey], worker_id: str, now: datetime
) -> list[TaskRun]:
    await _generic_plans(conn)
    cursor = await conn.execute(*pg_dispatch.claim_statement(keys, worker_id, now))
    return pg_dispatch.claimed(pg_dispatch.names(cursor), await cursor.fetchall())


async def heartbeat(
    conn: Conn, keys: Sequence[TaskKey], worker_id: str, now: datetime, held: Sequence[TaskKey]
) -> Beat:
    await _generic_plans(conn)
    statement = pg_dispatch.heartbeat_statement(keys, worker_id, now, held)
    return pg_dispatch.beat_of(await (await conn.execute(*statement)).fetchall())


async def complete(conn: Conn, outcomes: Sequence[Outcome]) -> tuple[Completion, list[Outcome]]:
    """``completion.complete`` of the outcomes whose runs hold one task run, in one statement;
    and the outcomes it left for ``completion.complete`` (runs of several task runs)."""
    values = [outcome_values(o) for o in outcomes_by_key(outcomes).values()]
    params = pg_dispatch.arrays("", _VALUES, values) | pg_dispatch.STATES
    await _generic_plans(conn)
    rows = await (await conn.execute(_COMPLETE_ALONE, params)).fetchall()
    family = {task_run_id for task_run_id, _, siblings, _ in rows if siblings != 1}
    written = {(task_run_id, attempt): pool for task_run_id, attempt, siblings, pool in rows
               if siblings == 1}  # fmt: skip
    ended = Counter(
        v["run_state"]
        for v in values
        if (v["id"], v["attempt"]) in written and v["run_finished_at"] is not None
    )
    done = Completion(
        applied=[task_run_id for task_run_id, _ in written],
        pools_freed=any(pool is not None for pool in written.values()),
        runs_finished=dict(ended),
    )
    return done, [o for o in outcomes if o.task_run_id in family]


@lru_cache(maxsize=64)
def text_of(query: sa.Select[Any]) -> tuple[str, dict[str, Any]]:
    """``query`` (a constant statement of the store's, built once) as psycopg's SQL text,
    compiled once, and the values of its own parameters (the caller adds its own): literal
    values written in, parameters as ``%(name)s``."""
    # Writing the literal values in asks for a value of every parameter; those the caller
    # gives stay placeholders all the same, so any will do until then.
    asked = [b.key for b in query.compile(dialect=_PG).binds.values() if b.required]
    expanded = query.params({name: None for name in asked}).compile(dialect=_PG)
    state = expanded.construct_expanded_state()
    return state.statement, dict(state.parameters)


async def read_planned(
    conn: Conn, query: sa.Select[Any], params: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """The rows of ``query``, prepared on first use and planned once (a generic plan): the
    scheduler's reads each pass, whose custom plans cost PostgreSQL 15-20 ms apiece (a union
    of gated subqueries over every partition), against 0.1 ms to run."""
    sql, own = text_of(query)
    await _generic_plans(conn)
    return await (await conn.execute(sql, own | dict(params), prepare=True)).fetchall()
