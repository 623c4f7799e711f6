"""Backfills: the ``BackfillStore`` port of ``SqlStore`` and its queries.

A step of a backfill writes everything it decided in one transaction, conditional on the
backfill's ``version``: the new runs (through ``insert_new_runs``, which skips a date taken
meanwhile), the re-runs, one ``backfill_runs`` row per decided date (the primary key
``(backfill_id, logical_date)`` refuses a date decided twice), and the cursor. Pause, resume
and cancel bump the version too, so a step planned before them writes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from tickwork.core.backfill import (
    ACTIVE_STATES,
    Action,
    Backfill,
    BackfillMode,
    BackfillState,
    Reprocess,
)
from tickwork.core.errors import Conflict, NotFound
from tickwork.core.model import RunState, RunTrigger, TaskRun, TaskRunState
from tickwork.core.states import CANCELLABLE_AT_REST, TERMINAL
from tickwork.ports.backfills import (
    BackfillCounts,
    BackfillDate,
    BackfillStepWrite,
    OpenDate,
)
from tickwork.store.common import chunked, param
from tickwork.store.dialect import Dialect
from tickwork.store.rows import retry_to_json, task_run_from_row
from tickwork.store.runs import cancel_task_runs, insert_new_runs, refresh_runs
from tickwork.store.schema import backfill_runs, backfills, runs, task_runs

T = TypeVar("T")
_ACTIVE = [s.value for s in ACTIVE_STATES]
_AT_REST_RUN = (RunState.SCHEDULED.value, RunState.QUEUED.value)


# -- rows ------------------------------------------------------------------------------------


def _to_row(b: Backfill) -> dict[str, Any]:
    return {
        "id": b.id,
        "job_id": b.job_id,
        "job_name": b.job_name,
        "range_start": b.start,
        "range_end": b.end,
        "mode": b.mode.value,
        "max_active": b.max_active,
        "chunk_size": b.chunk_size,
        "reprocess": b.reprocess.value,
        "reverse": b.reverse,
        "priority": b.priority,
        "state": b.state.value,
        "total": b.total,
        "cursor": b.cursor,
        "exhausted": b.exhausted,
        "version": b.version,
        "reason": b.reason,
        "created_at": b.created_at,
        "updated_at": b.updated_at,
        "finished_at": b.finished_at,
    }


def _from_row(r: RowMapping) -> Backfill:
    return Backfill(
        id=r["id"],
        job_id=r["job_id"],
        job_name=r["job_name"],
        start=r["range_start"],
        end=r["range_end"],
        mode=BackfillMode(r["mode"]),
        max_active=r["max_active"],
        chunk_size=r["chunk_size"],
        reprocess=Reprocess(r["reprocess"]),
        reverse=bool(r["reverse"]),
        priority=r["priority"],
        state=BackfillState(r["state"]),
        total=r["total"],
        cursor=r["cursor"],
        exhausted=bool(r["exhausted"]),
        version=r["version"],
        reason=r["reason"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        finished_at=r["finished_at"],
    )


# -- reads -----------------------------------------------------------------------------------


def create_backfill(conn: Connection, backfill: Backfill) -> None:
    overlapping = conn.execute(
        sa.select(backfills.c.id)
        .where(
            backfills.c.job_id == backfill.job_id,
            backfills.c.state.in_(_ACTIVE),
            backfills.c.range_start <= backfill.end,
            backfills.c.range_end >= backfill.start,
        )
        .limit(1)
    ).scalar()
    if overlapping is not None:
        raise Conflict(
            "range",
            f"backfill {overlapping} of job {backfill.job_name!r} covers part of this range; "
            "wait for it, or cancel it",
        )
    conn.execute(backfills.insert().values(**_to_row(backfill)))


def get_backfill(conn: Connection, backfill_id: str) -> Backfill | None:
    row = conn.execute(sa.select(backfills).where(backfills.c.id == backfill_id)).mappings()
    found = row.first()
    return None if found is None else _from_row(found)


def list_backfills(conn: Connection, job_id: str | None, limit: int) -> list[Backfill]:
    query = sa.select(backfills).order_by(backfills.c.created_at.desc(), backfills.c.id.desc())
    if job_id is not None:
        query = query.where(backfills.c.job_id == job_id)
    return [_from_row(r) for r in conn.execute(query.limit(limit)).mappings()]


def running_backfills(conn: Connection, limit: int) -> list[Backfill]:
    query = (
        sa.select(backfills)
        .where(backfills.c.state == BackfillState.RUNNING.value)
        .order_by(backfills.c.created_at, backfills.c.id)
        .limit(limit)
    )
    return [_from_row(r) for r in conn.execute(query).mappings()]


def open_dates(conn: Connection, backfill_id: str) -> list[OpenDate]:
    query = (
        sa.select(backfill_runs.c.logical_date, backfill_runs.c.run_id, runs.c.state)
        .join(runs, runs.c.id == backfill_runs.c.run_id)
        .where(backfill_runs.c.backfill_id == backfill_id, backfill_runs.c.outcome.is_(None))
        .order_by(backfill_runs.c.logical_date)
    )
    return [OpenDate(r.logical_date, r.run_id, RunState(r.state)) for r in conn.execute(query)]


def runs_for_dates(
    conn: Connection, job_id: str, dates: Sequence[datetime]
) -> dict[datetime, tuple[str, RunState]]:
    found: dict[datetime, tuple[str, RunState]] = {}
    for chunk in chunked(sorted(set(dates))):
        query = sa.select(runs.c.id, runs.c.logical_date, runs.c.state).where(
            runs.c.job_id == job_id,
            runs.c.logical_date.in_(list(chunk)),
            runs.c.trigger != RunTrigger.ENQUEUE.value,
        )
        found.update({r.logical_date: (r.id, RunState(r.state)) for r in conn.execute(query)})
    return found


def backfill_counts(conn: Connection, backfill_id: str) -> BackfillCounts:
    mine = backfill_runs.c.backfill_id == backfill_id
    grouped = conn.execute(
        sa.select(backfill_runs.c.outcome, sa.func.count())
        .where(mine)
        .group_by(backfill_runs.c.outcome)
    )
    by_outcome = {str(outcome): count for outcome, count in grouped if outcome is not None}
    running = conn.scalar(sa.select(sa.func.count()).where(mine, backfill_runs.c.outcome.is_(None)))
    recent = conn.execute(
        sa.select(runs.c.started_at, runs.c.finished_at)
        .join(backfill_runs, runs.c.id == backfill_runs.c.run_id)
        .where(mine, backfill_runs.c.outcome.in_(("success", "failed")))
        .order_by(runs.c.finished_at.desc())
        .limit(100)
    )
    durations = [(done - began).total_seconds() for began, done in recent if began and done]
    return BackfillCounts(by_outcome=by_outcome, running=running or 0, durations=durations)


def backfill_dates(
    conn: Connection, backfill_id: str, limit: int, after: datetime | None
) -> list[BackfillDate]:
    query = (
        sa.select(backfill_runs, runs.c.state.label("run_state"))
        .join(runs, runs.c.id == backfill_runs.c.run_id, isouter=True)
        .where(backfill_runs.c.backfill_id == backfill_id)
        .order_by(backfill_runs.c.logical_date)
        .limit(limit)
    )
    if after is not None:
        query = query.where(backfill_runs.c.logical_date > after)
    return [
        BackfillDate(
            logical_date=r["logical_date"],
            run_id=r["run_id"],
            action=r["action"],
            outcome=r["outcome"],
            run_state=None if r["run_state"] is None else RunState(r["run_state"]),
        )
        for r in conn.execute(query).mappings()
    ]


# -- writes ----------------------------------------------------------------------------------


def _bump(
    conn: Connection, backfill_id: str, where: sa.ColumnElement[bool], values: dict[str, Any]
) -> bool:
    result = conn.execute(
        sa.update(backfills)
        .where(backfills.c.id == backfill_id, where)
        .values(version=backfills.c.version + 1, **values)
    )
    return result.rowcount == 1


def set_state(
    conn: Connection,
    backfill_id: str,
    expected: frozenset[BackfillState],
    state: BackfillState,
    now: datetime,
    *,
    reason: str | None,
) -> bool:
    finished = now if state not in ACTIVE_STATES else None
    values = {"state": state.value, "updated_at": now, "reason": reason, "finished_at": finished}
    return _bump(conn, backfill_id, backfills.c.state.in_([s.value for s in expected]), values)


def step_backfill(conn: Connection, dialect: Dialect, step: BackfillStepWrite) -> bool:
    values = {
        "cursor": step.cursor,
        "exhausted": step.exhausted,
        "state": step.state.value,
        "reason": step.reason,
        "updated_at": step.now,
        "finished_at": None if step.state in ACTIVE_STATES else step.now,
    }
    if not _bump(conn, step.backfill_id, backfills.c.version == step.version, values):
        return False
    _close(conn, step.backfill_id, step.closed)
    inserted = {tr.run_id for tr in insert_new_runs(conn, dialect, step.new_runs)}
    records = [(n.run.logical_date, n.run.id, Action.CREATE) for n in step.new_runs]
    taken = [(date, rid) for date, rid, _ in records if rid not in inserted]
    records = [r for r in records if r[1] in inserted]
    records += [(d, rid, Action.TRACK) for d, rid in _runs_of(conn, step.new_runs, taken)]
    _rerun(conn, [rid for _, rid in step.reruns], step.priority, step.now)
    records += [(d, rid, Action.RERUN) for d, rid in step.reruns]
    records += [(d, rid, Action.TRACK) for d, rid in step.tracked]
    _record(conn, step, records)
    return True


def _close(conn: Connection, backfill_id: str, closed: Sequence[tuple[datetime, RunState]]) -> None:
    if closed:
        conn.execute(
            sa.update(backfill_runs)
            .where(
                backfill_runs.c.backfill_id == backfill_id,
                backfill_runs.c.logical_date == sa.bindparam("p_date"),
            )
            .values(outcome=sa.bindparam("p_outcome")),
            [{"p_date": date, "p_outcome": state.value} for date, state in closed],
        )


def _runs_of(
    conn: Connection, planned: Sequence[Any], taken: Sequence[tuple[datetime, str]]
) -> list[tuple[datetime, str]]:
    """The runs that hold dates another run took between the plan and the write."""
    if not taken:
        return []
    job_id = planned[0].run.job_id
    found = runs_for_dates(conn, job_id, [date for date, _ in taken])
    return [(date, found[date][0]) for date, _ in taken if date in found]


def _record(
    conn: Connection, step: BackfillStepWrite, records: Sequence[tuple[datetime, str, Action]]
) -> None:
    rows = [
        {
            "backfill_id": step.backfill_id,
            "logical_date": date,
            "run_id": run_id,
            "action": action.value,
            "outcome": None,
            "created_at": step.now,
        }
        for date, run_id, action in records
    ]
    rows += [
        {
            "backfill_id": step.backfill_id,
            "logical_date": date,
            "run_id": run_id,
            "action": Action.SKIP.value,
            "outcome": "skipped",
            "created_at": step.now,
        }
        for date, run_id in step.skipped
    ]
    if rows:
        conn.execute(backfill_runs.insert(), rows)


_TERMINAL = [s.value for s in TERMINAL]


def _rerun(conn: Connection, run_ids: Sequence[str], priority: int, now: datetime) -> None:
    """One more attempt of every task run of these finished runs; the attempts recorded so
    far stay in the history. A task run that was skipped never ran: its attempt is kept."""
    if not run_ids:
        return
    rearm_runs(conn, run_ids, priority, now)
    for chunk in chunked(list(run_ids)):
        conn.execute(
            sa.update(runs).where(runs.c.id.in_(chunk)).values(trigger=RunTrigger.BACKFILL.value)
        )
    refresh_runs(conn, run_ids, now)


def rearm_runs(
    conn: Connection, run_ids: Sequence[str], priority: int | None, now: datetime
) -> int:
    """Give every finished task run of these runs one more attempt, due ``now``, at
    ``priority`` (``None``: each keeps its own); how many were re-armed. The caller
    refreshes the runs' states."""
    changes: list[dict[str, Any]] = []
    for chunk in chunked(list(run_ids)):
        found = conn.execute(
            sa.select(task_runs)
            .where(task_runs.c.run_id.in_(chunk), task_runs.c.state.in_(_TERMINAL))
            .with_for_update()
        ).mappings()
        for row in found:
            tr = task_run_from_row(row)
            changes.append(_rearmed(tr, tr.priority if priority is None else priority, now))
    if changes:
        conn.execute(_REARM, changes)
    return len(changes)


def replay_run(conn: Connection, run_id: str, now: datetime) -> int:
    """Mark a finished run for replay: all its tasks run again (``Store.replay_run``)."""
    state = conn.scalar(sa.select(runs.c.state).where(runs.c.id == run_id).with_for_update())
    if state is None:
        raise NotFound("run", run_id)
    if state not in _FINISHED_RUN:
        return 0
    changed = rearm_runs(conn, [run_id], None, now)
    refresh_runs(conn, [run_id], now)
    return changed


_FINISHED_RUN = {s.value for s in (RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED,
                                   RunState.SKIPPED)}  # fmt: skip


def _rearmed(tr: TaskRun, priority: int, now: datetime) -> dict[str, Any]:
    attempt = tr.attempt if tr.state is TaskRunState.SKIPPED else tr.attempt + 1
    policy = dataclasses.replace(tr.retry, max_attempts=max(tr.retry.max_attempts, attempt))
    state = TaskRunState.PENDING if tr.upstream else TaskRunState.SCHEDULED
    return {
        "p_key_id": tr.id,
        "p_key_attempt": tr.attempt,
        "p_state": state.value,
        "p_attempt": attempt,
        "p_retry": retry_to_json(policy),
        "p_due_at": now,
        "p_priority": priority,
    }


_REARM = (
    sa.update(task_runs)
    .where(
        task_runs.c.id == sa.bindparam("p_key_id"),
        task_runs.c.attempt == sa.bindparam("p_key_attempt"),
    )
    .values(
        state=param(task_runs.c.state),
        attempt=param(task_runs.c.attempt),
        retry=param(task_runs.c.retry),
        due_at=param(task_runs.c.due_at),
        priority=param(task_runs.c.priority),
        queued_at=None,
        started_at=None,
        finished_at=None,
        heartbeat_at=None,
        worker_id=None,
        error=None,
        exit_code=None,
        result=None,
        cancel_requested=False,
    )
)


def cancel_backfill(conn: Connection, backfill_id: str, now: datetime, kill: bool) -> list[TaskRun]:
    values = {"state": BackfillState.CANCELLED.value, "updated_at": now, "finished_at": now}
    if not _bump(conn, backfill_id, backfills.c.state.in_(_ACTIVE), values):
        return []
    open_runs = (
        sa.select(backfill_runs.c.run_id)
        .where(backfill_runs.c.backfill_id == backfill_id, backfill_runs.c.outcome.is_(None))
        .scalar_subquery()
    )
    if kill:
        return cancel_task_runs(conn, task_runs.c.run_id.in_(open_runs), now)
    not_started = (
        sa.select(runs.c.id)
        .where(runs.c.id.in_(open_runs), runs.c.state.in_(_AT_REST_RUN))
        .scalar_subquery()
    )
    cancelled = conn.execute(
        sa.update(task_runs)
        .where(
            task_runs.c.run_id.in_(not_started),
            task_runs.c.state.in_([s.value for s in CANCELLABLE_AT_REST]),
        )
        .values(state=TaskRunState.CANCELLED.value, finished_at=now)
        .returning(task_runs.c.run_id)
    )
    refresh_runs(conn, set(cancelled.scalars().all()), now)
    return []
