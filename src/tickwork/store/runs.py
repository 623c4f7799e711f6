"""Runs: inserting, reading, listing, cancelling and retrying runs or single task runs, and
deriving run state."""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from tickwork.core.errors import NotFound, ValidationError
from tickwork.core.model import Job, NewRun, RunDetail, RunState, TaskRun, TaskRunState
from tickwork.core.states import CANCELLABLE_AT_REST, RETRYABLE, derive_run_state
from tickwork.ports import DeadLetterPage, JobChanged, RunFilter, RunPage, TimeWindow
from tickwork.store.common import chunked, param
from tickwork.store.dialect import Dialect, Statement
from tickwork.store.readiness import CHILD_COLUMNS, advance
from tickwork.store.rows import (
    attempt_from_row,
    retry_to_json,
    run_from_row,
    task_run_from_row,
    task_run_to_row,
)
from tickwork.store.run_rows import RUN_COLUMNS, TASK_RUN_COLUMNS, RunRows, rows_of
from tickwork.store.schema import attempts, jobs, runs, task_runs

RUN_TERMINAL = frozenset({RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED})
DEAD = "dead"


def insert_run_rows(conn: Connection, dialect: Dialect, rows: RunRows) -> None:
    """Insert runs and their task runs in bulk (``COPY`` on PostgreSQL): the one path every
    new run but a cron fire takes. A duplicate (job, logical date) of a run that is not
    enqueued raises IntegrityError."""
    dialect.bulk_insert(conn, runs, RUN_COLUMNS, rows.runs)
    dialect.bulk_insert(conn, task_runs, TASK_RUN_COLUMNS, rows.task_runs)


def insert_runs(conn: Connection, dialect: Dialect, new_runs: Sequence[NewRun]) -> None:
    """Insert runs given as records (job creation, manual triggers), with their keys."""
    insert_run_rows(conn, dialect, rows_of(new_runs))
    dialect.insert_run_keys(conn, [n.run for n in new_runs])


def enqueue_rows(
    conn: Connection,
    dialect: Dialect,
    rows: RunRows,
    statement: Statement | None,
    planned_from: Job | None = None,
) -> None:
    """Insert enqueued runs (``run_rows.rows_of_copies``) if the job they were planned from
    is still the live one (``JobChanged`` otherwise): by ``statement``, the dialect's guarded
    insert of these rows, when it has one (``Dialect.guarded_insert``), else after a check.
    Enqueued runs have no key: many may share a job and logical date."""
    if statement is not None:
        check_guarded(conn.exec_driver_sql(*statement).rowcount, rows, planned_from)
        return
    if planned_from is not None:
        current = sa.select(jobs.c.id).where(
            jobs.c.id == planned_from.id,
            jobs.c.updated_at == planned_from.updated_at,
            jobs.c.deleted_at.is_(None),
        )
        if conn.scalar(current) is None:
            raise JobChanged(f"job {planned_from.name!r} changed since it was read")
    insert_run_rows(conn, dialect, rows)


def check_guarded(rowcount: int, rows: RunRows, planned_from: Job | None) -> None:
    """Whether a guarded insert inserted ``rows``: ``JobChanged`` if the job had changed
    (nothing was inserted)."""
    if rowcount == len(rows.task_runs):
        return
    if rowcount == 0 and planned_from is not None:
        raise JobChanged(f"job {planned_from.name!r} changed since it was read")
    raise RuntimeError(f"inserted {rowcount} of {len(rows.task_runs)} task runs")


def insert_new_runs(
    conn: Connection, dialect: Dialect, new_runs: Sequence[NewRun]
) -> list[TaskRun]:
    """Insert the runs whose (job, logical date) is free; returns the task runs inserted."""
    if not new_runs:
        return []
    inserted = dialect.insert_unique_runs(conn, new_runs)
    fresh = [tr for n in new_runs if n.run.id in inserted for tr in n.task_runs]
    _insert_task_runs(conn, fresh)
    return fresh


def _insert_task_runs(conn: Connection, items: Sequence[TaskRun]) -> None:
    if items:
        conn.execute(task_runs.insert(), [task_run_to_row(tr) for tr in items])


def get_run(conn: Connection, run_id: str) -> RunDetail | None:
    row = (conn.execute(sa.select(runs).where(runs.c.id == run_id))).mappings().first()
    if row is None:
        return None
    trs = conn.execute(
        sa.select(task_runs).where(task_runs.c.run_id == run_id).order_by(task_runs.c.id)
    )
    history = conn.execute(
        sa.select(attempts)
        .join(task_runs, task_runs.c.id == attempts.c.task_run_id)
        .where(task_runs.c.run_id == run_id)
        .order_by(attempts.c.task_run_id, attempts.c.attempt)
    )
    return RunDetail(
        run=run_from_row(row),
        task_runs=tuple(task_run_from_row(r) for r in trs.mappings()),
        attempts=tuple(attempt_from_row(r) for r in history.mappings()),
    )


def list_runs(
    conn: Connection,
    job_id: str | None,
    state: str | None,
    limit: int,
    cursor: str | None,
    *,
    window: TimeWindow | None = None,
    also: RunFilter | None = None,
    dialect: Dialect | None = None,
) -> RunPage:
    query = runs_query(job_id, state, cursor, window).limit(limit + 1)
    for condition in _also_conditions(also or RunFilter(), dialect):
        query = query.where(condition)
    rows = (conn.execute(query)).mappings().all()
    page = [run_from_row(r) for r in rows[:limit]]
    more = len(rows) > limit and bool(page)
    next_cursor = encode_cursor(page[-1].logical_date, page[-1].id) if more else None
    return RunPage(runs=page, next_cursor=next_cursor)


def runs_query(
    job_id: str | None,
    state: str | None,
    cursor: str | None,
    window: TimeWindow | None = None,
) -> sa.Select[Any]:
    """The run search, newest first: a backward range scan of ``(job_id,) logical_date, id``."""
    query = sa.select(runs).order_by(runs.c.logical_date.desc(), runs.c.id.desc())
    if job_id is not None:
        query = query.where(runs.c.job_id == job_id)
    if state is not None:
        query = query.where(_state_filter(state))
    for condition in _window_conditions(window or TimeWindow()):
        query = query.where(condition)
    if cursor is not None:
        query = query.where(_before(runs.c.logical_date, runs.c.id, decode_cursor(cursor)))
    return query


def _also_conditions(also: RunFilter, dialect: Dialect | None) -> list[sa.ColumnElement[bool]]:
    """By trigger: the (trigger, logical_date, id) index. By tag: the runs of the tagged jobs
    (a subquery over jobs, a few thousand rows at most) along the logical date index."""
    found: list[sa.ColumnElement[bool]] = []
    if also.trigger is not None:
        found.append(runs.c.trigger == also.trigger)
    if also.tag is not None:
        assert dialect is not None, "a tag filter needs the store's dialect"
        tagged = sa.select(jobs.c.id).where(dialect.json_array_contains(jobs.c.tags, also.tag))
        found.append(runs.c.job_id.in_(tagged))
    return found


def _window_conditions(window: TimeWindow) -> list[sa.ColumnElement[bool]]:
    bounds = [
        (runs.c.logical_date, window.logical_from, window.logical_to),
        (runs.c.started_at, window.started_from, window.started_to),
    ]
    found: list[sa.ColumnElement[bool]] = []
    for column, low, high in bounds:
        if low is not None:
            found.append(column >= low)
        if high is not None:
            found.append(column < high)
    return found


def _before(
    stamp: sa.ColumnElement[datetime], key: sa.ColumnElement[str], after: tuple[datetime, str]
) -> sa.ColumnElement[bool]:
    """Rows after the cursor in (stamp DESC, key DESC) order: an index range, not a scan.

    Spelled as ``stamp <= x AND (stamp < x OR key < y)`` so the planner sees a bound on the
    leading index column (a row-value comparison is not used by SQLite's planner).
    """
    at, last_id = after
    return sa.and_(stamp <= at, sa.or_(stamp < at, key < last_id))


def dead_letters(
    conn: Connection, job_id: str | None, limit: int, cursor: str | None
) -> DeadLetterPage:
    query = (
        sa.select(task_runs)
        .where(task_runs.c.state == TaskRunState.FAILED.value)
        .order_by(task_runs.c.finished_at.desc(), task_runs.c.id.desc())
    )
    if job_id is not None:
        query = query.where(task_runs.c.job_id == job_id)
    if cursor is not None:
        query = query.where(_before(task_runs.c.finished_at, task_runs.c.id, decode_cursor(cursor)))
    rows = conn.execute(query.limit(limit + 1)).mappings().all()
    page = [task_run_from_row(r) for r in rows[:limit]]
    last = page[-1] if len(rows) > limit and page else None
    next_cursor = encode_cursor(last.finished_at, last.id) if last and last.finished_at else None
    return DeadLetterPage(task_runs=page, next_cursor=next_cursor)


def _state_filter(state: str) -> sa.ColumnElement[bool]:
    if state == DEAD:
        failed = sa.select(task_runs.c.id).where(
            task_runs.c.run_id == runs.c.id, task_runs.c.state == TaskRunState.FAILED.value
        )
        return failed.exists()
    if state not in {s.value for s in RunState}:
        accepted = ", ".join([*(s.value for s in RunState), DEAD])
        raise ValidationError("state", f"must be one of {accepted}")
    return runs.c.state == state


def encode_cursor(stamp: datetime, row_id: str) -> str:
    raw = f"{stamp.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        iso, run_id = raw.split("|", 1)
        logical_date = datetime.fromisoformat(iso)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValidationError("cursor", "is not a cursor returned by a previous page") from None
    if logical_date.tzinfo is None or "\x00" in run_id:  # PostgreSQL refuses NUL in text
        raise ValidationError("cursor", "is not a cursor returned by a previous page")
    return logical_date, run_id


def cancel_task_runs(
    conn: Connection, where: sa.ColumnElement[bool], now: datetime
) -> list[TaskRun]:
    """Cancel matching unfinished task runs; returns the running ones (now cancel_requested)."""
    at_rest = conn.execute(
        sa.update(task_runs)
        .where(where, task_runs.c.state.in_([s.value for s in CANCELLABLE_AT_REST]))
        .values(state=TaskRunState.CANCELLED.value, finished_at=now)
        .returning(task_runs.c.run_id)
    )
    changed = set(at_rest.scalars().all())
    running = conn.execute(
        sa.update(task_runs)
        .where(where, task_runs.c.state == TaskRunState.RUNNING.value)
        .values(cancel_requested=True)
        .returning(*task_runs.c)
    )
    requested = [task_run_from_row(r) for r in running.mappings()]
    refresh_runs(conn, changed, now)
    return requested


def cancel_run(conn: Connection, run_id: str, now: datetime) -> list[TaskRun]:
    _require_run(conn, run_id)
    return cancel_task_runs(conn, task_runs.c.run_id == run_id, now)


def get_task_run(conn: Connection, task_run_id: str) -> TaskRun | None:
    row = conn.execute(sa.select(task_runs).where(task_runs.c.id == task_run_id)).mappings()
    found = row.first()
    return None if found is None else task_run_from_row(found)


def cancel_task_run(conn: Connection, task_run_id: str, now: datetime) -> list[TaskRun]:
    _require_task_run(conn, task_run_id)
    return cancel_task_runs(conn, task_runs.c.id == task_run_id, now)


def retry_task_run(conn: Connection, task_run_id: str, now: datetime) -> list[TaskRun]:
    """One more attempt for one task run; in a DAG, the tasks below it that were marked
    ``upstream_failed`` because of it wait (``pending``) for the trigger rules again."""
    _require_task_run(conn, task_run_id)
    retried = retry_task_runs(conn, task_runs.c.id == task_run_id, now)
    if retried:
        _reopen_downstream(conn, retried[0], now)
    return retried


def _reopen_downstream(conn: Connection, retried: TaskRun, now: datetime) -> None:
    rows = conn.execute(
        sa.select(task_runs.c.id, task_runs.c.task_name, task_runs.c.upstream, task_runs.c.state)
        .where(task_runs.c.run_id == retried.run_id)
        .with_for_update()
    ).all()
    below: set[str] = set()
    frontier = {retried.task_name}
    while frontier:
        frontier = {r.task_name for r in rows if frontier & set(r.upstream)} - below
        below |= frontier
    reopen = [
        r.id for r in rows if r.task_name in below and r.state == TaskRunState.UPSTREAM_FAILED.value
    ]
    if reopen:
        conn.execute(
            sa.update(task_runs)
            .where(
                task_runs.c.id.in_(reopen),
                task_runs.c.state == TaskRunState.UPSTREAM_FAILED.value,
            )
            .values(state=TaskRunState.PENDING.value, finished_at=None)
        )
        refresh_runs(conn, [retried.run_id], now)


def retry_run(conn: Connection, run_id: str, now: datetime) -> list[TaskRun]:
    _require_run(conn, run_id)
    return retry_task_runs(conn, task_runs.c.run_id == run_id, now)


def retry_task_runs(
    conn: Connection, where: sa.ColumnElement[bool], now: datetime
) -> list[TaskRun]:
    """Give matching failed, upstream_failed or cancelled task runs one more attempt."""
    result = conn.execute(
        sa.select(task_runs)
        .where(where, task_runs.c.state.in_([s.value for s in RETRYABLE]))
        .order_by(task_runs.c.id)
        .with_for_update()
    )
    retried = [_one_more_attempt(task_run_from_row(r), now) for r in result.mappings()]
    if not retried:
        return []
    conn.execute(_RETRY_UPDATE, [_retry_params(tr) for tr in retried])
    refresh_runs(conn, {tr.run_id for tr in retried}, now)
    return retried


def _one_more_attempt(tr: TaskRun, now: datetime) -> TaskRun:
    """The task run ready for one more attempt. One with upstreams goes back to ``pending``:
    the trigger rules decide again (at once, in ``refresh_runs``) once its upstreams are
    done, so a retried DAG runs in order."""
    attempt = tr.attempt + 1
    policy = dataclasses.replace(tr.retry, max_attempts=max(tr.retry.max_attempts, attempt))
    return dataclasses.replace(
        tr,
        state=TaskRunState.PENDING if tr.upstream else TaskRunState.SCHEDULED,
        attempt=attempt,
        retry=policy,
        due_at=now,
        queued_at=None,
        started_at=None,
        finished_at=None,
        heartbeat_at=None,
        worker_id=None,
        cancel_requested=False,
    )


_RETRY_UPDATE = (
    sa.update(task_runs)
    .where(
        task_runs.c.id == sa.bindparam("p_key_id"),
        task_runs.c.attempt == sa.bindparam("p_key_attempt"),
        # Not ``IN``: an expanding parameter cannot be used in an executemany.
        sa.or_(*(task_runs.c.state == s.value for s in sorted(RETRYABLE))),
    )
    .values(
        state=param(task_runs.c.state),
        attempt=param(task_runs.c.attempt),
        retry=param(task_runs.c.retry),
        due_at=param(task_runs.c.due_at),
        queued_at=None,
        started_at=None,
        finished_at=None,
        heartbeat_at=None,
        worker_id=None,
        cancel_requested=False,
    )
)


def _retry_params(tr: TaskRun) -> dict[str, Any]:
    return {
        "p_key_id": tr.id,
        "p_key_attempt": tr.attempt - 1,
        "p_state": tr.state.value,
        "p_attempt": tr.attempt,
        "p_retry": retry_to_json(tr.retry),
        "p_due_at": tr.due_at,
    }


def _require_run(conn: Connection, run_id: str) -> None:
    found = conn.scalar(sa.select(runs.c.id).where(runs.c.id == run_id))
    if found is None:
        raise NotFound("run", run_id)


def _require_task_run(conn: Connection, task_run_id: str) -> None:
    found = conn.scalar(sa.select(task_runs.c.id).where(task_runs.c.id == task_run_id))
    if found is None:
        raise NotFound("task_run", task_run_id)


# -- derived run state -----------------------------------------------------------------


def refresh_runs(
    conn: Connection, run_ids: Iterable[str], now: datetime, *, ended: Counter[str] | None = None
) -> list[str]:
    """Advance each run's DAG (``readiness.advance``), then set the run's state, started_at and
    finished_at from its task runs (batched). Returns the ids of task runs made ``scheduled``;
    counts in ``ended`` the runs this finished, by their final state.
    """
    ready: list[str] = []
    for chunk in chunked(sorted(set(run_ids))):
        children = conn.execute(sa.select(*CHILD_COLUMNS).where(task_runs.c.run_id.in_(chunk)))
        by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for child in children.mappings():
            by_run[child["run_id"]].append(dict(child))
        for family in by_run.values():
            ready += advance(conn, family, now)
        parents = conn.execute(
            sa.select(runs.c.id, runs.c.state, runs.c.started_at, runs.c.finished_at).where(
                runs.c.id.in_(chunk)
            )
        )
        changes = [
            change
            for parent in parents.mappings()
            if (change := _derived(parent, by_run[parent["id"]], now)) is not None
        ]
        if changes:
            conn.execute(_RUN_UPDATE, changes)
            if ended is not None:
                ended.update(c["p_state"] for c in changes if c["p_finished_at"] is not None)
    return ready


_RUN_UPDATE = (
    sa.update(runs)
    .where(runs.c.id == sa.bindparam("p_key_id"))
    .values(
        state=param(runs.c.state),
        started_at=param(runs.c.started_at),
        finished_at=param(runs.c.finished_at),
    )
)


def _derived(
    parent: RowMapping, children: Sequence[Mapping[str, Any]], now: datetime
) -> dict[str, Any] | None:
    state = derive_run_state(TaskRunState(c["state"]) for c in children)
    started = [c["started_at"] for c in children if c["started_at"] is not None]
    finished = [c["finished_at"] for c in children if c["finished_at"] is not None]
    # Once set, a run's start stays: a run retried after it finished keeps the instant it
    # first started (retrying must not rewrite its history; its attempts say when each ran).
    started_at = parent["started_at"] or min(started, default=None)
    if state == RunState.RUNNING and started_at is None:
        started_at = now
    finished_at = None
    if state in RUN_TERMINAL:
        unchanged = parent["state"] == state.value and parent["finished_at"] is not None
        finished_at = parent["finished_at"] if unchanged else max(finished, default=now)
    new = (state.value, started_at, finished_at)
    if new == (parent["state"], parent["started_at"], parent["finished_at"]):
        return None
    return {
        "p_key_id": parent["id"],
        "p_state": new[0],
        "p_started_at": new[1],
        "p_finished_at": new[2],
    }
