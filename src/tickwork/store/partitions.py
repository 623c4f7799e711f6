"""Monthly partitions of the run history on PostgreSQL, and retention on both backends.

PostgreSQL partitions ``runs``, ``task_runs``, ``attempts`` and ``task_logs`` by RANGE on a
time-ordered id (``tickwork.ids``: 12 hex digits of milliseconds, then random), so a month
is the id range ``[hex(first ms of the month), hex(first ms of the next))``: ``runs`` and
``task_runs`` on their own id, ``attempts`` and ``task_logs`` on their task run's id (so they
share their task run's month). Each table also has a DEFAULT partition for ids outside every
month (made by hand, or far in the future); maintenance keeps it empty in practice.

Retention drops a month only when it lies wholly before the cutoff and holds no unfinished
work, children first, in one transaction per month. A run's task runs are created with it,
so they nearly always share its month; the ones that do not (a run made in the last
millisecond of a month) are deleted row by row with the run's month. There are no foreign
keys between these four tables on PostgreSQL (a partition referenced by one can only be
detached after a check that joins it against the whole referencing table), so this module
and ``jobs._unmaterialize_ahead`` delete children before parents themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import RunState, TaskRunState
from tickwork.core.states import DISPATCHABLE, TERMINAL
from tickwork.store.common import chunked
from tickwork.store.schema import PARTITION_KEYS, attempts, runs, task_logs, task_runs

log = logging.getLogger("tickwork.store.partitions")

#: Parents first; dropping goes the other way.
PARTITIONED = ("runs", "task_runs", "attempts", "task_logs")
#: How long a partition DDL statement waits for a table lock before giving up until the next
#: maintenance: a waiting ACCESS EXCLUSIVE request would queue every query behind it.
LOCK_TIMEOUT = "2s"
#: Runs deleted per transaction by SQLite retention.
RETENTION_BATCH = 500

UNFINISHED_RUNS = (RunState.SCHEDULED.value, RunState.QUEUED.value, RunState.RUNNING.value)
UNFINISHED_TASK_RUNS = tuple(sorted(s.value for s in TaskRunState if s not in TERMINAL))
DUE_TASK_RUNS = tuple(sorted(s.value for s in DISPATCHABLE))
FINISHED_RUNS = tuple(sorted({s.value for s in RunState} - set(UNFINISHED_RUNS)))


def month_start(instant: datetime) -> datetime:
    utc = instant.astimezone(UTC)
    return datetime(utc.year, utc.month, 1, tzinfo=UTC)


def add_months(month: datetime, count: int) -> datetime:
    index = month.year * 12 + month.month - 1 + count
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def id_bound(instant: datetime) -> str:
    """The smallest id made at ``instant`` or later (``tickwork.ids``)."""
    return f"{int(instant.timestamp() * 1000):012x}"


def month_of_id(row_id: str) -> datetime | None:
    """The month an id was made in, or None if it is not a ``tickwork.ids`` id."""
    try:
        ms = int(row_id[:12], 16)
        return month_start(datetime.fromtimestamp(ms / 1000, UTC))
    except (ValueError, OverflowError, OSError):
        return None


def partition_name(table: str, month: datetime) -> str:
    return f"{table}_p{month.year:04d}{month.month:02d}"


def _month_of_name(table: str, name: str) -> datetime | None:
    prefix = f"{table}_p"
    digits = name[len(prefix) :]
    if not name.startswith(prefix) or len(digits) != 6 or not digits.isdigit():
        return None
    return datetime(int(digits[:4]), int(digits[4:]), 1, tzinfo=UTC)


def create_partition_ddl(table: str, month: datetime) -> str:
    """``CREATE TABLE … PARTITION OF``: for a new, empty database (the migration)."""
    low, high = id_bound(month), id_bound(add_months(month, 1))
    return (
        f"CREATE TABLE IF NOT EXISTS {partition_name(table, month)} PARTITION OF {table} "
        f"FOR VALUES FROM ('{low}') TO ('{high}')"
    )


def attach_partition_ddl(table: str, month: datetime) -> list[str]:
    """Create the month as a table of its own, then attach it: attaching locks the parent
    only against schema changes (SHARE UPDATE EXCLUSIVE) where ``PARTITION OF`` would lock
    it against every query. (The DEFAULT partition is still locked while it is checked for
    rows of the month.)"""
    name = partition_name(table, month)
    low, high = id_bound(month), id_bound(add_months(month, 1))
    return [
        f"CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS)",
        f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM ('{low}') TO ('{high}')",
    ]


def create_default_ddl(table: str) -> str:
    return f"CREATE TABLE IF NOT EXISTS {table}_default PARTITION OF {table} DEFAULT"


def partition_months(conn: Connection, table: str) -> list[datetime]:
    """The months that ``table`` has a partition for, oldest first."""
    names = conn.execute(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = CAST(:table AS regclass)"
        ),
        {"table": table},
    ).scalars()
    return sorted(m for name in names if (m := _month_of_name(table, name)) is not None)


@dataclass(frozen=True, slots=True)
class MonthDrop:
    """Why a month that retention would drop was kept (``reason``), or None if dropped."""

    month: datetime
    reason: str | None


def create_months(conn: Connection, months: Sequence[datetime]) -> list[str]:
    """Create the missing partitions of ``months`` in every partitioned table; returns the
    names created. A month whose rows sit in the DEFAULT partition already cannot be created
    (PostgreSQL refuses): it is logged and left there, where it is still found."""
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    created: list[str] = []
    for table in PARTITIONED:
        have = set(partition_months(conn, table))
        options = _storage_options(conn, partition_name(table, max(have))) if have else None
        for month in months:
            if month in have:
                continue
            try:
                with conn.begin_nested():
                    for statement in attach_partition_ddl(table, month):
                        conn.exec_driver_sql(statement)
                    if options:
                        name = partition_name(table, month)
                        conn.exec_driver_sql(f"ALTER TABLE {name} SET ({options})")
            except sa.exc.DBAPIError as exc:
                if "would be violated" not in str(exc.orig):
                    raise
                log.warning("%s stays in %s_default: it holds rows of that month", table, table)
                continue
            created.append(partition_name(table, month))
    return created


def _storage_options(conn: Connection, partition: str) -> str | None:
    """``partition``'s storage parameters (e.g. the per-partition autovacuum settings of
    deploy/README.md), as ``SET (…)`` takes them: a new month takes the newest month's, as
    PostgreSQL takes none on the partitioned table for its partitions to inherit."""
    options = conn.execute(
        sa.text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:name)"),
        {"name": partition},
    ).scalar()
    return ", ".join(options) if options else None


def drop_month(conn: Connection, month: datetime) -> MonthDrop:
    """Drop ``month`` of the four tables in this transaction, unless it may hold unfinished
    work (then nothing changes and the reason is returned)."""
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    present = {
        table: partition_name(table, month)
        for table in PARTITIONED
        if month in partition_months(conn, table)
    }
    # No new writes into the month while it is judged (say, a manual retry of an old task run).
    conn.exec_driver_sql(f"LOCK TABLE {', '.join(present.values())} IN SHARE MODE")
    low, high = id_bound(month), id_bound(add_months(month, 1))
    reason = _unfinished(conn, present, low, high)
    if reason is not None:
        return MonthDrop(month, reason)
    _delete_stragglers(conn, low, high)
    if "runs" in present:
        conn.exec_driver_sql(
            f"DELETE FROM run_keys k USING {present['runs']} r "
            "WHERE k.job_id = r.job_id AND k.logical_date = r.logical_date AND k.run_id = r.id"
        )
    for table in reversed(PARTITIONED):  # children first
        if table in present:
            conn.exec_driver_sql(f"DROP TABLE {present[table]}")
    return MonthDrop(month, None)


def _unfinished(conn: Connection, present: dict[str, str], low: str, high: str) -> str | None:
    """Why the month must stay, if it must. Each check reads an index (the partial ones of
    unfinished rows, or ``run_id``), so the month's partitions stay locked only briefly.

    A run is finished only when all its task runs are (``derive_run_state``), so the first
    check covers the month's task runs of its own runs, ``pending`` ones included; the others
    cover task runs whose run is in another month."""
    checks: list[tuple[str, str]] = []
    if "runs" in present:
        runs_p = present["runs"]
        checks.append(("an unfinished run", f"SELECT 1 FROM {runs_p} WHERE state IN :runs"))
    if "task_runs" in present:
        tasks_p = present["task_runs"]
        checks += [
            # One query per partial index, so that each predicate matches its index's.
            ("a task run to do", f"SELECT 1 FROM {tasks_p} WHERE state IN :due"),
            ("a queued task run", f"SELECT 1 FROM {tasks_p} WHERE state = 'queued'"),
            ("a running task run", f"SELECT 1 FROM {tasks_p} WHERE state = 'running'"),
            # Ids out of order across processes: dropping these would orphan a newer run.
            ("task runs of runs made later", f"SELECT 1 FROM {tasks_p} WHERE run_id >= :high"),
        ]
    checks.append(
        (
            "an unfinished task run of its runs, made in a later month",
            "SELECT 1 FROM task_runs WHERE run_id >= :low AND run_id < :high AND id >= :high "
            "AND state IN :tasks",
        )
    )
    params = {
        "runs": UNFINISHED_RUNS,
        "due": DUE_TASK_RUNS,
        "tasks": UNFINISHED_TASK_RUNS,
        "low": low,
        "high": high,
    }
    for reason, query in checks:
        statement = sa.text(f"SELECT EXISTS ({query})")
        used = {k: v for k, v in params.items() if f":{k}" in query}
        for name, value in used.items():
            if isinstance(value, tuple):
                statement = statement.bindparams(sa.bindparam(name, expanding=True))
        if conn.scalar(statement, used):
            return reason
    return None


def _delete_stragglers(conn: Connection, low: str, high: str) -> None:
    """Delete the task runs (with their attempts and logs) of the month's runs that were made
    in a later month: they go with their run."""
    ids = list(
        conn.execute(
            sa.select(task_runs.c.id).where(
                task_runs.c.run_id >= low, task_runs.c.run_id < high, task_runs.c.id >= high
            )
        ).scalars()
    )
    for chunk in chunked(ids):
        conn.execute(sa.delete(task_logs).where(task_logs.c.task_run_id.in_(chunk)))
        conn.execute(sa.delete(attempts).where(attempts.c.task_run_id.in_(chunk)))
        conn.execute(sa.delete(task_runs).where(task_runs.c.id.in_(chunk)))


def droppable_months(conn: Connection, now: datetime, retention_days: int) -> list[datetime]:
    """Months of ``runs`` wholly older than the retention, oldest first."""
    cutoff = now - timedelta(days=retention_days)
    return [m for m in partition_months(conn, "runs") if add_months(m, 1) <= cutoff]


def delete_old_runs(conn: Connection, before: datetime, limit: int) -> int:
    """SQLite retention: delete up to ``limit`` finished runs made before ``before`` (by id),
    with their task runs, attempts and logs. Returns how many runs were deleted."""
    run_ids = list(
        conn.execute(
            sa.select(runs.c.id)
            .where(runs.c.id < id_bound(before), runs.c.state.in_(FINISHED_RUNS))
            .order_by(runs.c.id)
            .limit(limit)
        ).scalars()
    )
    if not run_ids:
        return 0
    children = sa.select(task_runs.c.id).where(task_runs.c.run_id.in_(run_ids))
    conn.execute(sa.delete(task_logs).where(task_logs.c.task_run_id.in_(children)))
    conn.execute(sa.delete(attempts).where(attempts.c.task_run_id.in_(children)))
    conn.execute(sa.delete(task_runs).where(task_runs.c.run_id.in_(run_ids)))
    conn.execute(sa.delete(runs).where(runs.c.id.in_(run_ids)))
    return len(run_ids)


assert set(PARTITIONED) == set(PARTITION_KEYS)
