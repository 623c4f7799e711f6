"""``FactsStore`` on SQLite and PostgreSQL: queue depths, dead letters, missed fires, the
schema revision and the server's settings.

Each query is shaped for the partial indexes of PostgreSQL (``state = 'queued'`` reads
``ix_task_runs_queued``, and so on; see ``store/schema.py``) and for the (state, time)
indexes of SQLite, so a scrape costs what the backlog holds, not the history.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.ports.facts import DEAD_LETTER_CAP, QueueFact, QueueState, StoreFacts
from tickwork.store.partitions import month_start, partition_name
from tickwork.store.schema import runs, task_runs

T = TypeVar("T")

#: PostgreSQL settings ``doctor`` reads (``pg_settings``), with their units as stored.
PG_SETTINGS = (
    "max_wal_size",
    "checkpoint_timeout",
    "autovacuum",
    "autovacuum_vacuum_scale_factor",
    "max_connections",
    "shared_buffers",
    "jit",
    "server_version",
)


def read_facts(conn: Connection, now: datetime, missed_since: datetime) -> StoreFacts:
    tr = task_runs.c
    queued = _by_lane(conn, "queued", tr.state == "queued", tr.queued_at <= now, tr.queued_at)
    running = _by_lane(conn, "running", tr.state == "running", None, None)
    due = _merged(
        _by_lane(conn, "due", tr.state == _literal(state), tr.due_at <= now, tr.due_at)
        for state in ("scheduled", "up_for_retry")  # one index range each (dispatch.py)
    )
    return StoreFacts(
        queues=queued + running + due,
        dead_letters=_dead_letters(conn),
        missed_fires=_missed(conn, missed_since),
    )


def _by_lane(
    conn: Connection,
    state: QueueState,
    where: sa.ColumnElement[bool],
    bound: sa.ColumnElement[bool] | None,
    since: sa.ColumnElement[datetime] | None,
) -> list[QueueFact]:
    tr = task_runs.c
    oldest = sa.func.min(since) if since is not None else sa.null()
    query = sa.select(tr.queue, tr.priority, sa.func.count(), oldest).where(where)
    if bound is not None:
        query = query.where(bound)
    rows = conn.execute(query.group_by(tr.queue, tr.priority)).all()
    return [QueueFact(q, int(p), state, int(n), _aware(o)) for q, p, n, o in rows]


def _literal(state: str) -> sa.BindParameter[str]:
    return sa.literal(state, literal_execute=True)  # a plan that can use the partial index


def _merged(lanes: Iterable[list[QueueFact]]) -> list[QueueFact]:
    """Facts of the same queue and priority added up (count), the oldest kept."""
    merged: dict[tuple[str, int], QueueFact] = {}
    for fact in itertools.chain.from_iterable(lanes):
        key = (fact.queue, fact.lane)
        seen = merged.get(key)
        if seen is None:
            merged[key] = fact
            continue
        olds = [t for t in (seen.oldest, fact.oldest) if t is not None]
        merged[key] = dataclasses.replace(
            fact, count=seen.count + fact.count, oldest=min(olds, default=None)
        )
    return list(merged.values())


def _dead_letters(conn: Connection) -> int:
    capped = sa.select(sa.literal(1)).where(task_runs.c.state == "failed").limit(DEAD_LETTER_CAP)
    return int(conn.execute(sa.select(sa.func.count()).select_from(capped.subquery())).scalar_one())


def _missed(conn: Connection, since: datetime) -> int:
    query = (
        sa.select(sa.func.count())
        .select_from(runs)
        .where(runs.c.state == "skipped", runs.c.logical_date >= since, runs.c.trigger == "missed")
    )
    return int(conn.execute(query).scalar_one())


def schema_revision(conn: Connection) -> str | None:
    # Asked first, not caught: reads run in autocommit on PostgreSQL, where no savepoint can
    # contain the error of a missing table.
    if not sa.inspect(conn).has_table("alembic_version"):
        return None  # never migrated
    row = conn.execute(sa.text("SELECT version_num FROM alembic_version")).first()
    return None if row is None else str(row[0])


def server_facts(conn: Connection) -> dict[str, str]:
    if conn.dialect.name != "postgresql":
        return {"now": datetime.now(UTC).isoformat()}
    found = {"now": conn.execute(sa.text("SELECT now()")).scalar_one().isoformat()}
    rows = conn.execute(
        sa.text("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(:names)"),
        {"names": list(PG_SETTINGS)},
    )
    for name, setting, unit in rows:
        found[name] = str(setting)
        if unit:
            found[f"{name}.unit"] = str(unit)  # "8kB", "MB", "s": as pg_settings has it
    return found | _hot_partitions(conn, datetime.now(UTC))


#: The partitioned tables every run updates in place (queued, running, finished).
HOT_TABLES = ("task_runs", "runs")
#: ``server_facts`` key prefix: ``vacuum_scale_factor:<partition>`` is the partition's own
#: ``autovacuum_vacuum_scale_factor`` ("" when it has none and the server's applies).
PARTITION_SCALE = "vacuum_scale_factor:"


def _hot_partitions(conn: Connection, now: datetime) -> dict[str, str]:
    """Each hot table's partition of this month, with its own vacuum scale factor (PostgreSQL
    takes no storage parameters on a partitioned table: each partition has its own)."""
    names = [partition_name(table, month_start(now)) for table in HOT_TABLES]
    rows = conn.execute(
        sa.text(
            "SELECT n, (SELECT option_value FROM pg_options_to_table(c.reloptions) "
            "WHERE option_name = 'autovacuum_vacuum_scale_factor') "
            "FROM unnest(CAST(:names AS text[])) AS n JOIN pg_class AS c ON c.oid = to_regclass(n)"
        ),
        {"names": names},
    )
    return {f"{PARTITION_SCALE}{name}": value or "" for name, value in rows}


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)  # SQLite returns naive UTC
