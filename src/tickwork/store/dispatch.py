"""Dispatch and execution: due work, queueing, claims, heartbeats, completion, requeue.

Every statement here is batched: one ``WHERE (id, attempt) IN (…)`` update per chunk of keys,
never one statement per task run. The worker's hot statements (claim, heartbeat, and the
lock and write of completion) are the dialect's; what they mean is decided here, once.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import RunState, TaskRun, TaskRunState
from tickwork.core.states import DISPATCHABLE
from tickwork.ports import Beat, TaskKey
from tickwork.store.common import chunked, key_in
from tickwork.store.dialect import Dialect
from tickwork.store.gates import admit, may_queue, ungated
from tickwork.store.rows import task_run_from_row
from tickwork.store.runs import refresh_runs
from tickwork.store.schema import jobs, runs, task_runs

S = TaskRunState
_DISPATCHABLE = [s.value for s in DISPATCHABLE]


_paused_job = sa.alias(jobs, "paused_job")

#: Task runs of paused jobs wait: pausing a job stops new runs, including its `at` run.
#: A scalar subquery (a primary-key lookup per candidate row, for the rows an index yields),
#: neither ``job_id NOT IN (SELECT …)`` nor ``NOT EXISTS``: PostgreSQL turns the latter into
#: an anti-join that reads every job first (21 ms a pass with 100,000 `at` jobs pending).
_NOT_PAUSED = (
    sa.select(_paused_job.c.paused)
    .where(_paused_job.c.id == task_runs.c.job_id)
    .scalar_subquery()
    .is_not(True)
)


#: Higher priority first; among equals the older logical date (FIFO), so a steady stream of
#: new runs never starves an older one; then the earlier due time.
DISPATCH_ORDER = (
    task_runs.c.priority.desc(),
    task_runs.c.logical_date,
    task_runs.c.due_at,
    task_runs.c.id,
)


def due_task_runs(
    conn: Connection, until: datetime, limit: int, after: datetime | None = None
) -> list[TaskRun]:
    """Up to ``limit`` task runs due by ``until`` that may be queued, in dispatch order.

    One index range per dispatchable state, merged: on PostgreSQL ``state IN (…)`` is the
    due index's own predicate, so the planner drops it from the index condition and walks
    every pending entry to test ``due_at`` (24 ms a pass with a million `at` runs pending, and
    growing). ``state = X`` stays the index's leading key: only the due rows are read."""
    params: dict[str, Any] = {"until": until, "limit": limit}
    if after is not None:
        params["after"] = after
    query = _due_query(ahead=after is not None)
    return [task_run_from_row(r) for r in (conn.execute(query, params)).mappings()]


@functools.cache
def _due_query(*, ahead: bool) -> sa.Select[Any]:
    """``due_task_runs``'s statement, built once with its values as bound parameters: the
    scheduler runs it twice a pass (dispatch and hand-off), and building the union, its
    subqueries and gates took ~6 ms of CPU each time (the idle scheduler's largest cost)."""
    per_state = [_due_in_state(state, ahead) for state in DISPATCHABLE_STATES]
    due = sa.union_all(*per_state).subquery("due")
    order = (due.c.priority.desc(), due.c.logical_date, due.c.due_at, due.c.id)
    return sa.select(due).order_by(*order).limit(_LIMIT)


_LIMIT = sa.bindparam("limit", type_=sa.Integer)


def _due_in_state(state: str, ahead: bool) -> sa.Select[Any]:
    """One state's due task runs, first ``limit`` in dispatch order (a subquery, so that
    each member of the union keeps its own ``ORDER BY … LIMIT`` on SQLite too)."""
    query = (
        sa.select(task_runs)
        .where(
            _in_state(state),
            task_runs.c.due_at <= sa.bindparam("until", type_=task_runs.c.due_at.type),
            _NOT_PAUSED,
            may_queue(),
        )
        .order_by(*DISPATCH_ORDER)
        .limit(_LIMIT)
    )
    if ahead:  # the hand-off ahead of time: only what nothing else gates
        after = sa.bindparam("after", type_=task_runs.c.due_at.type)
        query = query.where(task_runs.c.due_at > after, ungated())
    return sa.select(query.subquery())


def _in_state(state: str) -> sa.ColumnElement[bool]:
    # The state as a literal in the SQL: a plan prepared for a bound parameter could not
    # prove that the partial due index covers it.
    return task_runs.c.state == sa.literal(state, literal_execute=True)


def next_due_at(conn: Connection) -> datetime | None:
    """The earliest due time of a task run that could be queued (a gated one that must wait
    for a pool, an older run or its past is left out, or the scheduler would spin on it)."""
    row = conn.execute(_NEXT_DUE).one()
    found: list[datetime] = [due for due in row if due is not None]
    return min(found, default=None)


def earliest_due(state: str, *, after: sa.BindParameter[Any] | None = None) -> sa.ScalarSelect[Any]:
    """The earliest due time in ``state`` of a task run that could be queued; with ``after``,
    the earliest after it of one that nothing but its time gates (``due_task_runs``'s two
    kinds: dispatch and the hand-off ahead)."""
    # One state each: the (state, due_at) index then yields rows in due order, so the gates
    # are evaluated until the first row that passes, not for every dispatchable row before
    # a sort (``state IN (…) ORDER BY due_at`` cannot use the index order).
    query = sa.select(task_runs.c.due_at).where(_in_state(state), _NOT_PAUSED, may_queue())
    if after is not None:
        query = query.where(task_runs.c.due_at > after, ungated())
    return query.order_by(task_runs.c.due_at).limit(1).scalar_subquery()


#: The dispatchable states, one by one (as ``earliest_due`` takes them).
DISPATCHABLE_STATES = sorted(_DISPATCHABLE)
_NEXT_DUE = sa.select(*(earliest_due(state) for state in DISPATCHABLE_STATES))


_BEFORE = sa.bindparam("before", type_=task_runs.c.due_at.type)

#: Queued task runs no worker claimed, queued at or before ``before`` (the reconciler's read,
#: every housekeeping pass: a constant statement, read planned once, ``Store.queued_task_runs``).
QUEUED_BEFORE = (
    sa.select(task_runs)
    .where(_in_state(S.QUEUED.value), task_runs.c.queued_at <= _BEFORE)
    .order_by(task_runs.c.queued_at, task_runs.c.id)
    .limit(_LIMIT)
)

#: How many of those ``QUEUED_BEFORE`` rows (the same oldest ``limit``) each queue has: the
#: reconciler asks this first, and reads the rows only for a queue its broker holds fewer
#: messages for (``Store.queued_counts``).
_OLDEST_QUEUED = QUEUED_BEFORE.with_only_columns(task_runs.c.queue).subquery()
QUEUED_COUNTS = sa.select(_OLDEST_QUEUED.c.queue, sa.func.count()).group_by(_OLDEST_QUEUED.c.queue)

#: Running task runs whose heartbeat is older than ``before`` (the reaper's read, likewise).
STALE_BEFORE = (
    sa.select(task_runs)
    .where(_in_state(S.RUNNING.value), task_runs.c.heartbeat_at < _BEFORE)
    .order_by(task_runs.c.heartbeat_at, task_runs.c.id)
    .limit(_LIMIT)
)
_TABLE_ORDER = [c.name for c in task_runs.c]


def task_runs_of(rows: Sequence[Sequence[Any]]) -> list[TaskRun]:
    """Rows of ``QUEUED_BEFORE`` or ``STALE_BEFORE`` (the table's columns in order, JSON
    decoded, timestamps in UTC) as task runs."""
    return [task_run_from_row(dict(zip(_TABLE_ORDER, row, strict=True))) for row in rows]


def queued_task_runs(conn: Connection, queued_before: datetime, limit: int) -> list[TaskRun]:
    rows = conn.execute(QUEUED_BEFORE, {"before": queued_before, "limit": limit})
    return task_runs_of(rows.all())


def stale_running(conn: Connection, heartbeat_before: datetime, limit: int) -> list[TaskRun]:
    rows = conn.execute(STALE_BEFORE, {"before": heartbeat_before, "limit": limit})
    return task_runs_of(rows.all())


def _move(
    conn: Connection,
    keys: Sequence[TaskKey],
    where: sa.ColumnElement[bool],
    values: dict[str, Any],
    now: datetime,
) -> list[TaskRun]:
    """Conditionally update the rows with these keys; refresh their runs; return the rows won."""
    won = update_returning(conn, keys, where, values)
    refresh_runs(conn, [tr.run_id for tr in won], now)
    return won


def update_returning(
    conn: Connection,
    keys: Sequence[TaskKey],
    where: sa.ColumnElement[bool],
    values: dict[str, Any],
) -> list[TaskRun]:
    won: list[TaskRun] = []
    for chunk in chunked(keys):
        result = conn.execute(
            sa.update(task_runs)
            .where(key_in(chunk), where)
            .values(**values)
            .returning(*task_runs.c)
        )
        won.extend(task_run_from_row(r) for r in result.mappings())
    return won


def mark_queued(
    conn: Connection, dialect: Dialect, keys: Sequence[TaskKey], now: datetime
) -> list[TaskRun]:
    """Queue the task runs with these keys; one that declares a pool only if it fits."""
    dispatchable = task_runs.c.state.in_(_DISPATCHABLE)
    values = {"state": S.QUEUED.value, "queued_at": now}
    won = update_returning(conn, keys, sa.and_(dispatchable, task_runs.c.pool.is_(None)), values)
    pooled = _pooled(conn, keys, dispatchable)
    if pooled:
        fits = [(tr.id, tr.attempt) for tr in admit(conn, dialect, pooled)]
        won += update_returning(conn, fits, dispatchable, values)
    _runs_scheduled_to_queued(conn, won)
    return won


def _pooled(
    conn: Connection, keys: Sequence[TaskKey], where: sa.ColumnElement[bool]
) -> list[TaskRun]:
    """The task runs among ``keys`` that declare a pool, in dispatch order."""
    found: list[TaskRun] = []
    for chunk in chunked(keys):
        query = sa.select(task_runs).where(key_in(chunk), where, task_runs.c.pool.is_not(None))
        found += [task_run_from_row(r) for r in conn.execute(query).mappings()]
    return sorted(found, key=lambda tr: (-tr.priority, tr.logical_date, tr.due_at, tr.id))


def queue_ahead(
    conn: Connection, dialect: Dialect, keys: Sequence[TaskKey], now: datetime
) -> list[TaskRun]:
    """Queue task runs before they are due: ``queued_at`` is the due instant (``now`` if that
    has passed), when a worker may first claim them. Paused jobs' task runs are left alone."""
    if dialect.locks_rows:
        _lock_jobs_of(conn, dialect, keys)
    now_ = sa.literal(now, task_runs.c.due_at.type)
    claimable = sa.case((task_runs.c.due_at > now_, task_runs.c.due_at), else_=now_)
    where = sa.and_(task_runs.c.state.in_(_DISPATCHABLE), _NOT_PAUSED, ungated())
    won = update_returning(conn, keys, where, {"state": S.QUEUED.value, "queued_at": claimable})
    _runs_scheduled_to_queued(conn, won)
    return won


def _lock_jobs_of(conn: Connection, dialect: Dialect, keys: Sequence[TaskKey]) -> None:
    """Share-lock the rows of the task runs' jobs until the hand-off commits.

    Pausing, changing or deleting a job updates its row and then gives back the work handed
    out ahead of time. With the row locked, such a change either commits first (and the
    ``_NOT_PAUSED`` and state conditions see it) or waits, and then sees these task runs
    queued and takes them back. Without the lock it could slip in between and miss them.
    (Where rows cannot be locked, write transactions run one at a time.)
    """
    for chunk in chunked(keys):
        ids = sa.select(task_runs.c.job_id).where(task_runs.c.id.in_([k[0] for k in chunk]))
        query = sa.select(jobs.c.id).where(jobs.c.id.in_(ids)).order_by(jobs.c.id)
        conn.execute(dialect.share_lock(query)).all()


def _runs_scheduled_to_queued(conn: Connection, won: Sequence[TaskRun]) -> None:
    """A ``scheduled`` run has no queued, running or finished task run; with one queued it
    is ``queued``. A run in any other state keeps it (``derive_run_state``; a unit test
    holds that), so no sibling needs reading."""
    for chunk in chunked(sorted({tr.run_id for tr in won})):
        conn.execute(
            sa.update(runs)
            .where(runs.c.id.in_(chunk), runs.c.state == RunState.SCHEDULED.value)
            .values(state=RunState.QUEUED.value)
        )


def claim(
    conn: Connection, dialect: Dialect, keys: Sequence[TaskKey], worker_id: str, now: datetime
) -> list[TaskRun]:
    """Move queued task runs to running for ``worker_id`` (and their runs to running); the
    ones won, each with the results of its direct upstreams."""
    return with_inputs(conn, dialect.claim(conn, keys, worker_id, now))


def with_inputs(conn: Connection, claimed: list[TaskRun]) -> list[TaskRun]:
    """Attach to each claimed task run the results of its direct upstreams."""
    downstream = [tr for tr in claimed if tr.upstream]
    if not downstream:
        return claimed
    results: dict[tuple[str, str], Any] = {}
    for chunk in chunked(sorted({tr.run_id for tr in downstream})):
        rows = conn.execute(
            sa.select(task_runs.c.run_id, task_runs.c.task_name, task_runs.c.result).where(
                task_runs.c.run_id.in_(chunk), task_runs.c.result.is_not(None)
            )
        )
        results.update({(r.run_id, r.task_name): json.loads(r.result) for r in rows})
    return [
        dataclasses.replace(
            tr,
            inputs={
                up: results[(tr.run_id, up)] for up in tr.upstream if (tr.run_id, up) in results
            },
        )
        if tr.upstream
        else tr
        for tr in claimed
    ]


def mark_runs_running(conn: Connection, run_ids: set[str], now: datetime) -> None:
    """A run holding a running task run is running, whatever its other task runs are doing
    (``derive_run_state``; a unit test holds that), so a claim reads no siblings."""
    started = sa.literal(now, type_=runs.c.started_at.type)
    for chunk in chunked(sorted(run_ids)):
        conn.execute(
            sa.update(runs)
            .where(runs.c.id.in_(chunk))
            .values(
                state=RunState.RUNNING.value,
                started_at=sa.func.coalesce(runs.c.started_at, started),
                finished_at=None,
            )
        )


def requeue(conn: Connection, keys: Sequence[TaskKey], now: datetime) -> int:
    values = {"state": S.SCHEDULED.value, "due_at": now, "queued_at": None}
    moved = _move(conn, keys, task_runs.c.state == S.QUEUED.value, values, now)
    return len(moved)


def release(conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> int:
    values = {
        "state": S.QUEUED.value,
        "queued_at": now,
        "worker_id": None,
        "started_at": None,
        "heartbeat_at": None,
    }
    where = sa.and_(task_runs.c.state == S.RUNNING.value, task_runs.c.worker_id == worker_id)
    return len(_move(conn, keys, where, values, now))


def requeue_unstarted(conn: Connection, keys: Sequence[TaskKey], now: datetime) -> list[TaskRun]:
    values = {
        "state": S.QUEUED.value,
        "queued_at": now,
        "worker_id": None,
        "started_at": None,
        "heartbeat_at": None,
    }
    # started_at NULL: held unstarted by a heartbeat, and ``start`` not called since.
    where = sa.and_(task_runs.c.state == S.RUNNING.value, task_runs.c.started_at.is_(None))
    return _move(conn, keys, where, values, now)


def heartbeat(
    conn: Connection,
    dialect: Dialect,
    keys: Sequence[TaskKey],
    worker_id: str,
    now: datetime,
    *,
    held: Sequence[TaskKey],
) -> Beat:
    """Stamp the task runs ``worker_id`` runs, mark ``held`` ones unstarted; see ``Beat``."""
    return dialect.heartbeat(conn, keys, worker_id, now, held)


def start(conn: Connection, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[TaskKey]:
    mine = sa.and_(task_runs.c.state == S.RUNNING.value, task_runs.c.worker_id == worker_id)
    won: set[TaskKey] = set()
    for chunk in chunked(keys):
        result = conn.execute(
            sa.update(task_runs)
            .where(key_in(chunk), mine)
            .values(started_at=now, heartbeat_at=now)
            .returning(task_runs.c.id, task_runs.c.attempt)
        )
        won.update((row.id, row.attempt) for row in result)
    return won


# -- queueing what a completion made ready ----------------------------------------------


def queue_ready(conn: Connection, ids: Sequence[str], now: datetime) -> list[TaskRun]:
    """Queue at once the task runs just made ready that nothing else gates: no pool (the
    scheduler admits those), no ``depends_on_past``, and a job that is not paused."""
    if not ids:
        return []
    won: list[TaskRun] = []
    for chunk in chunked(sorted(ids)):
        result = conn.execute(
            sa.update(task_runs)
            .where(
                task_runs.c.id.in_(chunk),
                task_runs.c.state == S.SCHEDULED.value,
                task_runs.c.pool.is_(None),
                sa.not_(task_runs.c.depends_on_past),
                _NOT_PAUSED,
            )
            .values(state=S.QUEUED.value, queued_at=now)
            .returning(*task_runs.c)
        )
        won.extend(task_run_from_row(r) for r in result.mappings())
    _runs_scheduled_to_queued(conn, won)
    return won
