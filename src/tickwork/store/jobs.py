"""Jobs: create, read, list, pause, delete, and materializing cron fires into runs."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.errors import Conflict
from tickwork.core.model import Job, NewRun, ScheduleKind, Task, TaskRun, TaskRunState
from tickwork.ports import JobFilter, Materialization
from tickwork.store.common import chunked
from tickwork.store.dialect import Dialect
from tickwork.store.rows import job_from_row, job_to_row, task_from_row, task_to_row
from tickwork.store.runs import cancel_task_runs, insert_new_runs, insert_runs, refresh_runs
from tickwork.store.schema import jobs, runs, task_runs, tasks

LIVE = jobs.c.deleted_at.is_(None)


def create_jobs(
    conn: Connection, dialect: Dialect, items: Sequence[tuple[Job, Sequence[NewRun]]]
) -> None:
    if not items:
        return
    _refuse_taken_names(conn, [job.name for job, _ in items])
    _bulk_rows(conn, dialect, jobs, [job_to_row(job) for job, _ in items])
    _bulk_rows(
        conn,
        dialect,
        tasks,
        [task_to_row(job.id, i, t) for job, _ in items for i, t in enumerate(job.tasks)],
    )
    insert_runs(conn, dialect, [run for _, new_runs in items for run in new_runs])


def _bulk_rows(
    conn: Connection, dialect: Dialect, table: sa.Table, rows: Sequence[dict[str, Any]]
) -> None:
    """Rows made by one ``*_to_row`` function (same keys, same order), inserted in bulk."""
    if rows:
        dialect.bulk_insert(conn, table, tuple(rows[0]), [tuple(row.values()) for row in rows])


def _refuse_taken_names(conn: Connection, names: Sequence[str]) -> None:
    # The partial unique index is the real guard; checking first names the culprit.
    twice = [name for name, count in Counter(names).items() if count > 1]
    if twice:
        raise Conflict("name", f"the batch holds the job name {twice[0]!r} more than once")
    for chunk in chunked(names):
        taken = conn.scalar(sa.select(jobs.c.name).where(LIVE, jobs.c.name.in_(chunk)))
        if taken is not None:
            raise Conflict("name", f"a job named {taken!r} already exists")


def get_job(conn: Connection, name: str) -> Job | None:
    found = _load_jobs(conn, sa.select(jobs).where(LIVE, jobs.c.name == name))
    return found[0] if found else None


def history_job_id(conn: Connection, name: str) -> str | None:
    """The id of the live job named ``name``, else of the job last deleted with that name."""
    query = (
        sa.select(jobs.c.id)
        .where(jobs.c.name == name)
        .order_by(jobs.c.deleted_at.is_not(None), jobs.c.deleted_at.desc())
        .limit(1)
    )
    found: str | None = conn.execute(query).scalar()
    return found


def list_jobs(
    conn: Connection,
    dialect: Dialect,
    limit: int,
    after: str | None,
    where: JobFilter | None = None,
) -> list[Job]:
    query = sa.select(jobs).where(LIVE).order_by(jobs.c.name).limit(limit)
    if after is not None:
        query = query.where(jobs.c.name > after)
    for condition in _job_conditions(dialect, where or JobFilter()):
        query = query.where(condition)
    return _load_jobs(conn, query)


def _job_conditions(dialect: Dialect, where: JobFilter) -> list[sa.ColumnElement[bool]]:
    found: list[sa.ColumnElement[bool]] = []
    if where.name_prefix:
        # substr, not LIKE: exact and case-sensitive on both backends, no escaping of % and _.
        prefix = where.name_prefix
        found.append(sa.func.substr(jobs.c.name, 1, len(prefix)) == prefix)
    if where.tag is not None:
        found.append(dialect.json_array_contains(jobs.c.tags, where.tag))
    if where.paused is not None:
        found.append(jobs.c.paused.is_(where.paused))
    if where.schedule_kind is not None:
        found.append(jobs.c.schedule_kind == where.schedule_kind)
    if where.queue is not None:
        found.append(jobs.c.queue == where.queue)
    if where.last_state is not None:
        found.append(_last_state() == where.last_state)
    return found


def _last_state() -> sa.ScalarSelect[Any]:
    """The state of the job's newest run: one probe of ``ix_runs_job_logical_date_id`` per
    job read (the name order stops at the page's limit)."""
    return (
        sa.select(runs.c.state)
        .where(runs.c.job_id == jobs.c.id)
        .order_by(runs.c.logical_date.desc(), runs.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )


#: Columns a job update never writes: identity, history and the pause switch.
_KEPT_ON_UPDATE = frozenset({"id", "created_at", "paused", "last_fire_at", "deleted_at"})


def update_job(
    conn: Connection,
    dialect: Dialect,
    job: Job,
    expected_updated_at: datetime,
    reschedule: bool,
    *,
    new_runs: Sequence[NewRun],
) -> bool:
    stored_kind = conn.scalar(
        sa.select(jobs.c.schedule_kind)
        .where(jobs.c.id == job.id, LIVE, jobs.c.updated_at == expected_updated_at)
        .with_for_update()
    )
    if stored_kind is None:
        return False
    if stored_kind == ScheduleKind.CRON.value:
        # Fires created ahead are not history yet: plan them again from the new definition.
        _give_back_ahead(conn, dialect, job.id, job.updated_at, reset_next=not reschedule)
    # Without a schedule change, next_fire_at stays whatever the scheduler has made it since.
    kept = _KEPT_ON_UPDATE if reschedule else _KEPT_ON_UPDATE | {"next_fire_at"}
    row = {k: v for k, v in job_to_row(job).items() if k not in kept}
    conn.execute(sa.update(jobs).where(jobs.c.id == job.id).values(**row))
    conn.execute(tasks.delete().where(tasks.c.job_id == job.id))
    conn.execute(tasks.insert(), [task_to_row(job.id, i, t) for i, t in enumerate(job.tasks)])
    insert_new_runs(conn, dialect, new_runs)
    return True


def due_cron_jobs(conn: Connection, now: datetime, limit: int) -> list[Job]:
    query = (
        sa.select(jobs)
        .where(_CRON_ACTIVE, jobs.c.next_fire_at <= now)
        .order_by(jobs.c.next_fire_at, jobs.c.id)
        .limit(limit)
    )
    return _load_jobs(conn, query)


def next_fire_at(conn: Connection) -> datetime | None:
    earliest: datetime | None = conn.scalar(NEXT_FIRE)
    return earliest


_CRON_ACTIVE = sa.and_(
    LIVE, jobs.c.paused.is_(False), jobs.c.schedule_kind == ScheduleKind.CRON.value
)
#: The earliest ``next_fire_at`` of a live, unpaused cron job. IS NOT NULL lets the index
#: skip the jobs that have no next fire (all but cron).
NEXT_FIRE = sa.select(sa.func.min(jobs.c.next_fire_at)).where(
    jobs.c.next_fire_at.is_not(None), _CRON_ACTIVE
)


def _load_jobs(conn: Connection, query: sa.Select[tuple[object, ...]]) -> list[Job]:
    rows = (conn.execute(query)).mappings().all()
    if not rows:
        return []
    by_job: dict[str, list[Task]] = defaultdict(list)
    for chunk in chunked([r["id"] for r in rows]):
        task_rows = conn.execute(
            sa.select(tasks).where(tasks.c.job_id.in_(chunk)).order_by(tasks.c.position)
        )
        for t in task_rows.mappings():
            by_job[t["job_id"]].append(task_from_row(t))
    return [job_from_row(r, tuple(by_job[r["id"]])) for r in rows]


def set_paused(
    conn: Connection, dialect: Dialect, job_id: str, paused: bool, now: datetime
) -> bool:
    result = conn.execute(
        sa.update(jobs).where(jobs.c.id == job_id, LIVE).values(paused=paused, updated_at=now)
    )
    if result.rowcount and paused:
        # A paused job runs nothing new; on resume its catch-up rule applies to the fires
        # given back like to any other fire that came due while it was paused.
        _give_back_ahead(conn, dialect, job_id, now, reset_next=True)
    return result.rowcount > 0


def _give_back_ahead(
    conn: Connection, dialect: Dialect, job_id: str, now: datetime, *, reset_next: bool
) -> None:
    """Take back the job's work the scheduler handed out before it was due.

    Task runs queued ahead (``queued_at`` still to come) go back to ``scheduled``: the
    broker may still deliver them at their instant, but that claims nothing. Cron fires
    created ahead are deleted; with ``reset_next`` the job's next fire goes back to the
    earliest of them, so they are planned again.
    """
    moved = conn.execute(
        sa.update(task_runs)
        .where(
            task_runs.c.job_id == job_id,
            task_runs.c.state == TaskRunState.QUEUED.value,
            task_runs.c.queued_at > now,
        )
        .values(state=TaskRunState.SCHEDULED.value, queued_at=None)
        .returning(task_runs.c.run_id)
    )
    refresh_runs(conn, set(moved.scalars()), now)
    _unmaterialize_ahead(conn, dialect, job_id, now, reset_next)


def _unmaterialize_ahead(
    conn: Connection, dialect: Dialect, job_id: str, now: datetime, reset_next: bool
) -> None:
    ahead = conn.execute(
        sa.select(runs.c.id, runs.c.logical_date)
        .join(jobs, jobs.c.id == runs.c.job_id)
        .where(
            runs.c.job_id == job_id,
            jobs.c.schedule_kind == "cron",
            runs.c.state == "scheduled",
            runs.c.trigger == "schedule",
            runs.c.logical_date > now,
        )
    ).all()
    if not ahead:
        return
    run_ids = [row.id for row in ahead]
    conn.execute(sa.delete(task_runs).where(task_runs.c.run_id.in_(run_ids)))
    conn.execute(sa.delete(runs).where(runs.c.id.in_(run_ids)))
    dialect.delete_run_keys(conn, job_id, [(row.id, row.logical_date) for row in ahead])
    if reset_next:
        earliest = min(row.logical_date for row in ahead)
        conn.execute(sa.update(jobs).where(jobs.c.id == job_id).values(next_fire_at=earliest))


def delete_job(conn: Connection, dialect: Dialect, job_id: str, now: datetime) -> list[TaskRun]:
    result = conn.execute(
        sa.update(jobs).where(jobs.c.id == job_id, LIVE).values(deleted_at=now, updated_at=now)
    )
    if result.rowcount == 0:
        return []
    _give_back_ahead(conn, dialect, job_id, now, reset_next=False)
    return cancel_task_runs(conn, task_runs.c.job_id == job_id, now)


def materialize(
    conn: Connection,
    dialect: Dialect,
    job_id: str,
    expected_next: datetime,
    new_next: datetime | None,
    *,
    new_runs: Sequence[NewRun],
) -> list[TaskRun]:
    if not advance_next_fire(conn, job_id, expected_next, new_next, new_runs):
        return []
    inserted = insert_new_runs(conn, dialect, new_runs)
    return [tr for tr in inserted if tr.state == TaskRunState.QUEUED]


def materialize_many(
    conn: Connection, *, dialect: Dialect, items: Sequence[Materialization]
) -> list[TaskRun]:
    """``materialize`` for many jobs: each job's advance stays conditional; the runs of the
    winners go in together."""
    won = [
        new_run
        for item in items
        if advance_next_fire(conn, item.job_id, item.expected_next, item.new_next, item.runs)
        for new_run in item.runs
    ]
    inserted = insert_new_runs(conn, dialect, won)
    return [tr for tr in inserted if tr.state == TaskRunState.QUEUED]


def advance_next_fire(
    conn: Connection,
    job_id: str,
    expected_next: datetime,
    new_next: datetime | None,
    new_runs: Sequence[NewRun],
) -> bool:
    """Move the job's next fire on, if it is still ``expected_next``; False if another
    scheduler advanced it first (or the job was deleted): then its runs must not be inserted."""
    last_fire = max((n.run.logical_date for n in new_runs), default=None)
    result = conn.execute(
        sa.update(jobs)
        .where(jobs.c.id == job_id, LIVE, jobs.c.next_fire_at == expected_next)
        .values(
            next_fire_at=new_next,
            last_fire_at=jobs.c.last_fire_at if last_fire is None else last_fire,
        )
    )
    return bool(result.rowcount)
