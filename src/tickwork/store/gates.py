"""What may keep a due task run from being queued, beyond its job being paused.

- ``max_active_runs``: only the job's oldest unfinished runs (by logical date) move; a newer
  run waits until an older one finishes.
- ``depends_on_past``: a task waits until the same task in the job's previous run (by logical
  date) succeeded or was skipped.
- pools: a task run enters its pool only while the pool has its ``pool_slots`` free. The
  conditions below only keep out task runs whose pool is full already; ``admit`` decides
  exactly, in order, for a batch.

Each condition costs nothing for task runs that do not use it (the cheap column test comes
first), so jobs without DAG features pay no extra lookup.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import RunState, TaskRun, TaskRunState
from tickwork.store.dialect import Dialect
from tickwork.store.pools import used_slots
from tickwork.store.schema import jobs, pools, runs, task_runs

S = TaskRunState
UNFINISHED_RUN = (RunState.SCHEDULED.value, RunState.QUEUED.value, RunState.RUNNING.value)
PAST_OK = (S.SUCCESS.value, S.SKIPPED.value)

_job = sa.alias(jobs, "gate_job")
_older = sa.alias(runs, "older_run")
_prev_run = sa.alias(runs, "prev_run")
_prev = sa.alias(task_runs, "prev_task_run")
_pool = sa.alias(pools, "gate_pool")
_held = sa.alias(task_runs, "held")


def _max_active_ok() -> sa.ColumnElement[bool]:
    limit = (
        sa.select(_job.c.max_active_runs).where(_job.c.id == task_runs.c.job_id).scalar_subquery()
    )
    older_unfinished = (
        sa.select(sa.func.count())
        .where(
            _older.c.job_id == task_runs.c.job_id,
            _older.c.state.in_(UNFINISHED_RUN),
            _older.c.logical_date < task_runs.c.logical_date,
        )
        .scalar_subquery()
    )
    return sa.or_(limit.is_(None), older_unfinished < limit)


def _past_ok() -> sa.ColumnElement[bool]:
    previous_date = (
        sa.select(sa.func.max(_prev_run.c.logical_date))
        .where(
            _prev_run.c.job_id == task_runs.c.job_id,
            _prev_run.c.logical_date < task_runs.c.logical_date,
        )
        # Two levels down: correlate with the outer task run explicitly, not the EXISTS.
        .correlate(task_runs)
        .scalar_subquery()
    )
    blocking = sa.exists().where(
        _prev.c.job_id == task_runs.c.job_id,
        _prev.c.task_name == task_runs.c.task_name,
        _prev.c.logical_date == previous_date,
        _prev.c.state.not_in(PAST_OK),
    )
    return sa.or_(sa.not_(task_runs.c.depends_on_past), sa.not_(blocking))


def _pool_not_full() -> sa.ColumnElement[bool]:
    slots = sa.select(_pool.c.slots).where(_pool.c.name == task_runs.c.pool).scalar_subquery()
    used = (
        sa.select(sa.func.coalesce(sa.func.sum(_held.c.pool_slots), 0))
        .where(_held.c.pool == task_runs.c.pool, _held.c.state.in_(("queued", "running")))
        .scalar_subquery()
    )
    return sa.or_(task_runs.c.pool.is_(None), used + task_runs.c.pool_slots <= slots)


def ungated() -> sa.ColumnElement[bool]:
    """Task runs nothing but their due time gates: no pool, no ``depends_on_past``, and a
    job without ``max_active_runs``. Only these may be handed to the broker ahead of time;
    whether a gated one may go can only be judged at its instant."""
    # A scalar subquery (a primary-key lookup per candidate row), not ``NOT EXISTS``: in a
    # generic plan (``Store.next_work``) PostgreSQL made that an anti-join reading every job.
    limit = (
        sa.select(_job.c.max_active_runs).where(_job.c.id == task_runs.c.job_id).scalar_subquery()
    )
    return sa.and_(
        task_runs.c.pool.is_(None), sa.not_(task_runs.c.depends_on_past), limit.is_(None)
    )


def may_queue() -> sa.ColumnElement[bool]:
    """Due task runs that nothing but a full batch keeps from being queued."""
    return sa.and_(_pool_not_full(), _past_ok(), _max_active_ok())


def admit(conn: Connection, dialect: Dialect, candidates: Sequence[TaskRun]) -> list[TaskRun]:
    """The candidates that fit their pools, taken in the order given (priority first, then
    the older logical date); the rest wait. The pool rows are locked first (in name order),
    so two transactions cannot both fill the last slot."""
    names = sorted({tr.pool for tr in candidates if tr.pool is not None})
    if not names:
        return list(candidates)
    query = (
        sa.select(pools.c.name, pools.c.slots).where(pools.c.name.in_(names)).order_by(pools.c.name)
    )
    free = {name: slots for name, slots in conn.execute(dialect.update_lock(query))}
    for name, used in used_slots(conn, free).items():
        free[name] -= used
    admitted = []
    for tr in candidates:
        if tr.pool is None:
            admitted.append(tr)
        elif free.get(tr.pool, 0) >= tr.pool_slots:
            free[tr.pool] -= tr.pool_slots
            admitted.append(tr)
    return admitted
