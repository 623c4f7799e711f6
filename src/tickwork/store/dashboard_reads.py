"""Bounded read queries for the dashboard's pages (``DashboardReads``).

Each query reads through an index range with a limit, so a page costs the same with 100,000
runs as with 100: counts are capped, lists are keyset pages, and history is reached through
the newest runs of the (job,) logical date index, never by scanning task runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import (
    LogChunk,
    RunState,
    Schedule,
    ScheduleKind,
    TaskRun,
    TaskRunState,
)
from tickwork.ports.web import (
    CronJob,
    GridColumn,
    QueueDepth,
    RecentRun,
    ScheduleGroup,
    StateCount,
)
from tickwork.store.common import chunked
from tickwork.store.rows import log_from_row, run_from_row, task_run_from_row
from tickwork.store.schema import jobs, runs, task_logs, task_runs

T = TypeVar("T")
FAILED = TaskRunState.FAILED.value
#: How many of the newest runs the lateness figures are computed over.
LATENESS_RUNS = 500
#: Jobs per statement of ``recent_run_states`` (SQLite allows 500 legs of a compound select).
RECENT_LEGS = 100


def run_state_counts(conn: Connection, since: datetime) -> list[StateCount]:
    # Every state named: one short range of the (state, logical_date) index per state. Without
    # the IN list, SQLite scanned that whole index (100,000 entries: 49 ms against 0.7 ms).
    query = (
        sa.select(runs.c.state, sa.func.count())
        .where(runs.c.state.in_([s.value for s in RunState]), runs.c.logical_date >= since)
        .group_by(runs.c.state)
    )
    return [StateCount(state, int(n)) for state, n in conn.execute(query)]


def queue_depths(conn: Connection) -> list[QueueDepth]:
    query = (
        sa.select(
            task_runs.c.queue,
            task_runs.c.priority,
            sa.func.count(),
            sa.func.min(task_runs.c.queued_at),
        )
        .where(task_runs.c.state == TaskRunState.QUEUED.value)
        .group_by(task_runs.c.queue, task_runs.c.priority)
        .order_by(task_runs.c.queue, task_runs.c.priority.desc())
    )
    found = []
    for queue, priority, depth, oldest in conn.execute(query):
        found.append(QueueDepth(queue, int(priority), int(depth), _stamp(oldest)))
    return found


def failing_now(conn: Connection, since: datetime, limit: int) -> list[TaskRun]:
    query = (
        sa.select(task_runs)
        .where(task_runs.c.state == FAILED, task_runs.c.finished_at >= since)
        .order_by(task_runs.c.finished_at.desc(), task_runs.c.id.desc())
        .limit(limit)
    )
    return [task_run_from_row(r) for r in conn.execute(query).mappings()]


def start_lateness(conn: Connection, since: datetime, limit: int) -> list[float]:
    newest = (
        sa.select(runs.c.id)
        .where(runs.c.logical_date >= since)
        .order_by(runs.c.logical_date.desc(), runs.c.id.desc())
        .limit(min(limit, LATENESS_RUNS))
        .subquery()
    )
    query = sa.select(task_runs.c.due_at, task_runs.c.started_at).where(
        task_runs.c.run_id.in_(sa.select(newest.c.id)), task_runs.c.started_at.is_not(None)
    )
    return [
        max(0.0, (started - due).total_seconds())
        for due, started in ((_stamp(d), _stamp(s)) for d, s in conn.execute(query.limit(limit)))
        if due is not None and started is not None
    ]


def recent_run_states(
    conn: Connection, job_ids: Sequence[str], per_job: int
) -> dict[str, list[RecentRun]]:
    """The newest ``per_job`` runs of each job in one statement, each job one backward range
    of the (job_id, logical_date, id) index: a LATERAL join over the ids on PostgreSQL, a
    UNION ALL of one leg per job on SQLite (a query per job cost 50 round trips a page)."""
    found: dict[str, list[RecentRun]] = {job_id: [] for job_id in job_ids}
    postgres = conn.dialect.name == "postgresql"
    for chunk in chunked(list(job_ids), RECENT_LEGS):
        if postgres:
            rows = conn.execute(_LATERAL, {"ids": list(chunk), "n": per_job})
        else:
            params: dict[str, Any] = {f"j{i}": job_id for i, job_id in enumerate(chunk)}
            rows = conn.execute(_union_of(len(chunk)), {**params, "n": per_job})
        for job_id, run_id, state, logical_date in rows:
            found[job_id].append(RecentRun(run_id, state, logical_date))
    for strip in found.values():  # UNION ALL keeps no order across legs: newest first again
        strip.sort(key=lambda r: (r.logical_date, r.id), reverse=True)
    return found


_RECENT = "SELECT job_id, id, state, logical_date FROM runs WHERE job_id = {job} "
_RECENT += "ORDER BY logical_date DESC, id DESC LIMIT :n"
_LATERAL = sa.text(
    "SELECT r.job_id, r.id, r.state, r.logical_date "
    "FROM unnest(CAST(:ids AS text[])) AS j(id) CROSS JOIN LATERAL ("
    + _RECENT.format(job="j.id")
    + ") AS r"
).columns(runs.c.job_id, runs.c.id, runs.c.state, runs.c.logical_date)


@lru_cache(maxsize=8)
def _union_of(legs: int) -> sa.TextClause:
    text = " UNION ALL ".join(
        f"SELECT * FROM ({_RECENT.format(job=f':j{i}')})" for i in range(legs)
    )
    columns = (runs.c.job_id, runs.c.id, runs.c.state, runs.c.logical_date)
    return sa.text(text).columns(*columns)  # type: ignore[return-value]


def grid(conn: Connection, job_id: str, count: int) -> list[GridColumn]:
    query = (
        sa.select(runs)
        .where(runs.c.job_id == job_id)
        .order_by(runs.c.logical_date.desc(), runs.c.id.desc())
        .limit(count)
    )
    newest = [run_from_row(r) for r in conn.execute(query).mappings()]
    cells: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
    if newest:
        trs = sa.select(
            task_runs.c.id, task_runs.c.run_id, task_runs.c.task_name, task_runs.c.state
        ).where(task_runs.c.run_id.in_([r.id for r in newest]))
        for tr_id, run_id, task, state in conn.execute(trs):
            cells[run_id][task] = (tr_id, state)
    return [GridColumn(run=r, cells=cells[r.id]) for r in reversed(newest)]


def running_task_runs(conn: Connection, limit: int) -> list[TaskRun]:
    query = (
        sa.select(task_runs)
        .where(task_runs.c.state == TaskRunState.RUNNING.value)
        .order_by(task_runs.c.heartbeat_at, task_runs.c.id)
        .limit(limit)
    )
    return [task_run_from_row(r) for r in conn.execute(query).mappings()]


def pool_waiting(conn: Connection) -> dict[str, int]:
    query = (
        sa.select(task_runs.c.pool, sa.func.count())
        .where(
            task_runs.c.pool.is_not(None),
            task_runs.c.state == TaskRunState.SCHEDULED.value,
        )
        .group_by(task_runs.c.pool)
    )
    return {pool: int(n) for pool, n in conn.execute(query)}


def dead_letter_count(conn: Connection, cap: int) -> int:
    capped = sa.select(task_runs.c.id).where(task_runs.c.state == FAILED).limit(cap).subquery()
    return int(conn.scalar(sa.select(sa.func.count()).select_from(capped)) or 0)


_CRON_LIVE = (jobs.c.deleted_at.is_(None), jobs.c.schedule_kind == ScheduleKind.CRON.value)
_SCHEDULE = (jobs.c.cron, jobs.c.timezone, jobs.c.start_at, jobs.c.end_at)


def cron_schedules(conn: Connection, until: datetime) -> list[ScheduleGroup]:
    """Grouped in the database: 2,000 jobs on a few dozen schedules are a few dozen rows."""
    active = sa.func.sum(sa.case((jobs.c.paused.is_(False), 1), else_=0))
    query = (
        sa.select(*_SCHEDULE, sa.func.count(), active)
        .where(*_CRON_LIVE, jobs.c.next_fire_at < until)
        .group_by(*_SCHEDULE)
    )
    return [
        ScheduleGroup(_cron(cron, zone, start, end), int(n), int(up or 0))
        for cron, zone, start, end, n, up in conn.execute(query)
    ]


def cron_jobs_of(conn: Connection, schedules: Sequence[Schedule], until: datetime) -> list[CronJob]:
    if not schedules:
        return []
    c = jobs.c
    same = [
        sa.and_(
            c.cron == s.cron,
            c.timezone == s.timezone,
            c.start_at.is_not_distinct_from(s.start),
            c.end_at.is_not_distinct_from(s.end),
        )
        for s in schedules
    ]
    query = (
        sa.select(*_SCHEDULE, c.name, c.paused, c.next_fire_at)
        .where(*_CRON_LIVE, c.next_fire_at < until, sa.or_(*same))
        .order_by(c.name)
    )
    return [
        CronJob(name, _cron(cron, zone, start, end), bool(paused), next_fire)
        for cron, zone, start, end, name, paused, next_fire in conn.execute(query)
    ]


def _cron(cron: str, zone: str, start: datetime | None, end: datetime | None) -> Schedule:
    return Schedule(ScheduleKind.CRON, cron=cron, timezone=zone, start=start, end=end)


def log_tail(conn: Connection, task_run_id: str, limit: int) -> list[LogChunk]:
    # A backward range of the (task_run_id, seq) primary key: the tail of a 100 MB log costs
    # what the tail of a small one does.
    query = (
        sa.select(task_logs)
        .where(task_logs.c.task_run_id == task_run_id)
        .order_by(task_logs.c.seq.desc())
        .limit(limit)
    )
    return [log_from_row(r) for r in reversed(conn.execute(query).mappings().all())]


def change_digest(conn: Connection) -> tuple[Any, ...]:
    newest = conn.scalar(sa.select(sa.func.max(runs.c.id)))
    active = conn.execute(
        sa.select(runs.c.state, sa.func.count())
        .where(runs.c.state.in_(("queued", "running")))
        .group_by(runs.c.state)
        .order_by(runs.c.state)
    ).all()
    return (newest, tuple((s, int(n)) for s, n in active), dead_letter_count(conn, 1000))


def run_digest(conn: Connection, run_id: str) -> tuple[Any, ...]:
    query = (
        sa.select(task_runs.c.id, task_runs.c.state, task_runs.c.attempt)
        .where(task_runs.c.run_id == run_id)
        .order_by(task_runs.c.id)
    )
    return tuple((i, s, int(a)) for i, s, a in conn.execute(query))


def _stamp(value: datetime | None) -> datetime | None:
    # min() keeps its column's type, so SQLAlchemy already made these aware UTC datetimes.
    return value
