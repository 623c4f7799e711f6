"""Run alerts in SQL: the runs whose start deadline or SLA passed in a window, and the
``run_alerts`` rows that make each alert fire once per (run, kind).

Candidates are read per distinct limit (a job's ``start_deadline``, default or set, and its
``sla``): for a limit ``v`` the runs with ``since < logical_date + v <= now`` are one range of
``ix_runs_logical_date_id``, so a look costs what the window holds, never the history. Jobs
share a few limits in practice; the ranges go in one statement, their jobs in a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from tickwork.core.alerts import (
    WATCHED_TRIGGERS,
    Alert,
    AlertKind,
    AlertPolicy,
    WatchedRun,
)
from tickwork.core.ledger import DEFAULT_GRACE
from tickwork.core.model import RunState, RunTrigger
from tickwork.ports.alerts import AlertCandidate, AlertSummary, FiredAlert, UnfiredAlert
from tickwork.store.dialect import Dialect, insert_ignoring
from tickwork.store.schema import jobs, run_alerts, runs

_DEFAULT = DEFAULT_GRACE.total_seconds()
_TRIGGERS = sorted(t.value for t in WATCHED_TRIGGERS)
_LIVE = sa.and_(jobs.c.deleted_at.is_(None), jobs.c.paused.is_(sa.false()))


def alert_candidates(conn: Connection, since: datetime, now: datetime) -> list[AlertCandidate]:
    limits = sorted({_DEFAULT, *_limits(conn)})
    spans = [
        sa.and_(runs.c.logical_date > since - d, runs.c.logical_date <= now - d)
        for d in (timedelta(seconds=v) for v in limits)
    ]
    # The runs first, by ranges of their logical date alone (one per limit), then their few
    # jobs by primary key: so the plan cannot start from the jobs table, whatever the
    # statistics say (a nested loop over every job costs ~1 ms per 100 jobs).
    # UNION ALL, not OR: SQLite scans the whole table for an OR of ranges (16 -> 108 ms at
    # 50,000 runs), each arm of a union is an index range on both databases. A run in two
    # windows comes twice; it is looked at once.
    ranges = [sa.select(*_RUN_COLUMNS).where(runs.c.trigger.in_(_TRIGGERS), s) for s in spans]
    found = {r["id"]: r for r in conn.execute(sa.union_all(*ranges)).mappings()}.values()
    policies = _policies(conn, {r["job_id"] for r in found})
    candidates: list[AlertCandidate] = []
    for row in found:
        policy = policies.get(row["job_id"])
        if policy is not None:
            candidates += _in_window(_watched(row), policy, since, now)
    return candidates


_RUN_COLUMNS = (
    runs.c.id,
    runs.c.job_id,
    runs.c.job_name,
    runs.c.logical_date,
    runs.c.state,
    runs.c.started_at,
    runs.c.finished_at,
    runs.c.trigger,
)


_LIMIT_COLUMNS = (jobs.c.start_deadline, jobs.c.sla)


def _limits(conn: Connection) -> set[float]:
    """The limits jobs set (deleted or paused ones too: their runs are dropped later), in
    one statement; partial indexes hold only the jobs that set one, so this costs what they
    are, not the jobs table."""
    query = sa.union(
        *(
            sa.select(c.label("v")).where(c.is_not(None))
            for c in (jobs.c.start_deadline, jobs.c.sla)
        )
    )
    return {float(v) for v in conn.scalars(query)}


def _policies(conn: Connection, job_ids: set[str]) -> dict[str, AlertPolicy]:
    """The alert policies of the live, unpaused jobs among ``job_ids``."""
    if not job_ids:
        return {}
    query = sa.select(jobs.c.id, jobs.c.start_deadline, jobs.c.sla).where(
        jobs.c.id.in_(sorted(job_ids)), _LIVE
    )
    return {r.id: AlertPolicy(_delta(r.start_deadline), _delta(r.sla)) for r in conn.execute(query)}


def _in_window(
    run: WatchedRun, policy: AlertPolicy, since: datetime, now: datetime
) -> list[AlertCandidate]:
    """The kinds whose limit instant (logical date + limit) of ``run`` lies in (since, now]."""
    limits = [(AlertKind.MISSED, policy.deadline), (AlertKind.SLA_MISS, policy.sla)]
    return [
        AlertCandidate(run, policy, kind)
        for kind, limit in limits
        if limit is not None and since < run.logical_date + limit <= now
    ]


def _watched(row: RowMapping) -> WatchedRun:
    return WatchedRun(
        run_id=row["id"],
        job_name=row["job_name"],
        logical_date=row["logical_date"],
        state=RunState(row["state"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        trigger=RunTrigger(row["trigger"]),
    )


def _delta(seconds: float | None) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=seconds)


def record_alerts(
    conn: Connection, dialect: Dialect, alerts: Sequence[Alert], now: datetime
) -> list[Alert]:
    if not alerts:
        return []
    job_ids = _job_ids(conn, {a.run.run_id for a in alerts})
    recorded: list[Alert] = []
    insert = insert_ignoring(dialect, run_alerts, ["run_id", "kind"])
    for alert in alerts:  # one row each: RETURNING says which were new
        row = _row(alert, job_ids.get(alert.run.run_id, ""), now)
        if conn.execute(insert.values(row).returning(run_alerts.c.run_id)).first() is not None:
            recorded.append(alert)
    return recorded


def _job_ids(conn: Connection, run_ids: set[str]) -> dict[str, str]:
    query = sa.select(runs.c.id, runs.c.job_id).where(runs.c.id.in_(sorted(run_ids)))
    return {r.id: r.job_id for r in conn.execute(query)}


def _row(alert: Alert, job_id: str, now: datetime) -> dict[str, Any]:
    return {
        "run_id": alert.run.run_id,
        "kind": alert.kind.value,
        "job_id": job_id,
        "job_name": alert.run.job_name,
        "logical_date": alert.run.logical_date,
        "limit_seconds": alert.limit.total_seconds(),
        "late_seconds": alert.late_by.total_seconds(),
        "fired_at": now,
    }


def prune_alerts(conn: Connection, before: datetime) -> int:
    """Delete the alerts fired before ``before`` (retention); returns how many. A pruned
    alert cannot fire again: the leader looks back an hour, retention keeps whole days."""
    return conn.execute(sa.delete(run_alerts).where(run_alerts.c.fired_at < before)).rowcount


def unfired_alerts(conn: Connection, recorded_before: datetime, limit: int) -> list[UnfiredAlert]:
    """Alerts whose ``hook_done_at`` is null (a range of their partial index), with their
    run as it is now; a run deleted since comes without one."""
    query = (
        sa.select(
            run_alerts.c.run_id.label("alert_run_id"),
            run_alerts.c.kind,
            run_alerts.c.limit_seconds,
            run_alerts.c.late_seconds,
            run_alerts.c.fired_at,
            *_RUN_COLUMNS,
        )
        .select_from(run_alerts.outerjoin(runs, runs.c.id == run_alerts.c.run_id))
        .where(run_alerts.c.hook_done_at.is_(None), run_alerts.c.fired_at < recorded_before)
        .order_by(run_alerts.c.fired_at, run_alerts.c.run_id, run_alerts.c.kind)
        .limit(limit)
    )
    return [_unfired(row) for row in conn.execute(query).mappings()]


def _unfired(row: RowMapping) -> UnfiredAlert:
    kind = AlertKind(row["kind"])
    alert = None
    if row["id"] is not None:
        alert = Alert(
            kind=kind,
            run=_watched(row),
            limit=timedelta(seconds=row["limit_seconds"]),
            late_by=timedelta(seconds=row["late_seconds"]),
        )
    return UnfiredAlert(row["alert_run_id"], kind, row["fired_at"], alert)


def mark_hooks_done(conn: Connection, keys: Sequence[tuple[str, AlertKind]], at: datetime) -> None:
    for kind in sorted({k for _, k in keys}, key=lambda k: k.value):  # one statement a kind
        run_ids = sorted({r for r, k in keys if k is kind})
        conn.execute(
            sa.update(run_alerts)
            .where(
                run_alerts.c.kind == kind.value,
                run_alerts.c.run_id.in_(run_ids),
                run_alerts.c.hook_done_at.is_(None),
            )
            .values(hook_done_at=at)
        )


def recent_alerts(
    conn: Connection, since: datetime, job_name: str | None, limit: int
) -> AlertSummary:
    where = [run_alerts.c.fired_at >= since]
    if job_name is not None:
        where.append(run_alerts.c.job_name == job_name)
    by_kind = sa.select(run_alerts.c.kind, sa.func.count()).where(*where).group_by("kind")
    counts: dict[str, int] = {row[0]: row[1] for row in conn.execute(by_kind)}
    query = (
        sa.select(run_alerts)
        .where(*where)
        .order_by(run_alerts.c.fired_at.desc(), run_alerts.c.run_id)
        .limit(limit)
    )
    return AlertSummary(
        missed=counts.get(AlertKind.MISSED.value, 0),
        sla_misses=counts.get(AlertKind.SLA_MISS.value, 0),
        newest=[_fired(r) for r in conn.execute(query).mappings()],
    )


def _fired(row: RowMapping) -> FiredAlert:
    return FiredAlert(
        run_id=row["run_id"],
        kind=AlertKind(row["kind"]),
        job_name=row["job_name"],
        logical_date=row["logical_date"],
        limit_seconds=row["limit_seconds"],
        late_seconds=row["late_seconds"],
        fired_at=row["fired_at"],
    )
