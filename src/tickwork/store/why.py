"""The facts "why isn't it running?" needs (``core.why.WhyFacts``), read in one snapshot.

Each fact is what a gate in ``gates.py`` or ``dispatch.py`` looks at, read the same way:
the older unfinished runs for ``max_active_runs``, a pool's queued and running task runs, the
previous run's task for ``depends_on_past``, and what is queued ahead in the dispatch order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import Job, Run, TaskRun, TaskRunState
from tickwork.core.why import LiveWorker, PastTask, PoolLoad, WhyFacts
from tickwork.store import jobs as job_queries
from tickwork.store.gates import UNFINISHED_RUN
from tickwork.store.rows import run_from_row, task_run_from_row
from tickwork.store.schema import jobs, pools, runs, task_runs
from tickwork.store.workers import list_workers

T = TypeVar("T")
HELD = (TaskRunState.QUEUED.value, TaskRunState.RUNNING.value)
#: Unfinished runs ``job why`` explains at most (the oldest first).
JOB_RUNS = 5


def run_facts(conn: Connection, run_id: str, seen_since: datetime) -> WhyFacts | None:
    row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
    if row is None:
        return None
    run = run_from_row(row)
    found = conn.execute(
        sa.select(task_runs).where(task_runs.c.run_id == run_id).order_by(task_runs.c.id)
    )
    trs = tuple(task_run_from_row(r) for r in found.mappings())
    return _facts(conn, _job_of(conn, run.job_id), run, trs, seen_since)


def job_facts(
    conn: Connection, name: str, seen_since: datetime
) -> tuple[WhyFacts, list[WhyFacts]] | None:
    job = job_queries.get_job(conn, name)
    if job is None:
        return None
    oldest = conn.execute(
        sa.select(runs.c.id)
        .where(runs.c.job_id == job.id, runs.c.state.in_(UNFINISHED_RUN))
        .order_by(runs.c.logical_date)
        .limit(JOB_RUNS)
    ).scalars()
    waiting = [f for rid in oldest if (f := run_facts(conn, rid, seen_since)) is not None]
    workers = _workers(conn, seen_since)
    return WhyFacts(job=job, workers=workers), waiting


def _job_of(conn: Connection, job_id: str) -> Job | None:
    name = conn.scalar(
        sa.select(jobs.c.name).where(jobs.c.id == job_id, jobs.c.deleted_at.is_(None))
    )
    return None if name is None else job_queries.get_job(conn, name)


def _facts(
    conn: Connection, job: Job | None, run: Run, trs: Sequence[TaskRun], seen_since: datetime
) -> WhyFacts:
    return WhyFacts(
        job=job,
        run=run,
        task_runs=tuple(trs),
        older_active=_older_active(conn, run),
        pools={p.name: p for p in _pools(conn, {tr.pool for tr in trs if tr.pool})},
        past=_past(conn, run, [tr.task_name for tr in trs if tr.depends_on_past]),
        workers=_workers(conn, seen_since),
        queued_ahead={tr.id: _ahead(conn, tr) for tr in trs if tr.state is TaskRunState.QUEUED},
    )


def _older_active(conn: Connection, run: Run) -> tuple[str, ...]:
    query = (
        sa.select(runs.c.id)
        .where(
            runs.c.job_id == run.job_id,
            runs.c.state.in_(UNFINISHED_RUN),
            runs.c.logical_date < run.logical_date,
        )
        .order_by(runs.c.logical_date)
        .limit(1000)
    )
    return tuple(conn.execute(query).scalars())


def _pools(conn: Connection, names: set[str | None]) -> list[PoolLoad]:
    loads = []
    for name, slots in conn.execute(
        sa.select(pools.c.name, pools.c.slots).where(pools.c.name.in_(names))
    ):
        held = sa.and_(task_runs.c.pool == name, task_runs.c.state.in_(HELD))
        used = conn.scalar(
            sa.select(sa.func.coalesce(sa.func.sum(task_runs.c.pool_slots), 0)).where(held)
        )
        holders = conn.execute(
            sa.select(task_runs.c.run_id).where(held).distinct().limit(5)
        ).scalars()
        loads.append(PoolLoad(name, slots, int(used or 0), tuple(holders)))
    return loads


def _past(conn: Connection, run: Run, names: Sequence[str]) -> dict[str, PastTask]:
    if not names:
        return {}
    previous = conn.execute(
        sa.select(runs.c.id, runs.c.logical_date)
        .where(runs.c.job_id == run.job_id, runs.c.logical_date < run.logical_date)
        .order_by(runs.c.logical_date.desc())
        .limit(1)
    ).first()
    if previous is None:
        return {}
    found = conn.execute(
        sa.select(task_runs.c.task_name, task_runs.c.state).where(
            task_runs.c.run_id == previous.id, task_runs.c.task_name.in_(names)
        )
    )
    return {
        name: PastTask(previous.id, previous.logical_date, TaskRunState(state))
        for name, state in found
    }


def _workers(conn: Connection, seen_since: datetime) -> tuple[LiveWorker, ...] | None:
    live = [w for w in list_workers(conn, seen_since) if w.stopped_at is None]
    return tuple(LiveWorker(w.id, w.queues, w.concurrency, w.running) for w in live)


def _ahead(conn: Connection, tr: TaskRun) -> int:
    """Queued task runs of its queue that a worker takes first (higher priority, or equal
    and queued earlier; ids break ties, as they grow with time)."""
    queued_at = task_runs.c.queued_at
    earlier = (
        sa.or_(queued_at < tr.queued_at, sa.and_(queued_at == tr.queued_at, task_runs.c.id < tr.id))
        if tr.queued_at
        else sa.false()
    )
    count = conn.scalar(
        sa.select(sa.func.count()).where(
            task_runs.c.state == TaskRunState.QUEUED.value,
            task_runs.c.queue == tr.queue,
            task_runs.c.id != tr.id,
            sa.or_(
                task_runs.c.priority > tr.priority,
                sa.and_(task_runs.c.priority == tr.priority, earlier),
            ),
        )
    )
    return int(count or 0)
