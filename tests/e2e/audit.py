"""Who wrote what: an audit trigger the acceptance tests install in their own database.

Every insert, update and delete of ``jobs``, ``runs``, ``task_runs``, ``leases`` and ``fences`` is
recorded with PostgreSQL's clock and the writing connection's ``application_name``, which
each tickwork process of ``tests/e2e/cluster.py`` sets to its own name (``scheduler-1``,
``worker-0``, …). Heartbeats (updates of ``heartbeat_at`` alone) are left out.

This is the test's record, not tickwork's: it tells, for instance, whether a scheduler wrote
anything after another replica took its lease over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

Sql = Callable[..., list[tuple[Any, ...]]]

INSTALL = """
CREATE TABLE test_audit (
    seq bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    app text NOT NULL DEFAULT current_setting('application_name'),
    tbl text NOT NULL,
    op text NOT NULL,
    row_id text,
    state text,
    attempt bigint
);
CREATE FUNCTION test_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    new_row jsonb := CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE to_jsonb(NEW) END;
    old_row jsonb := CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE to_jsonb(OLD) END;
    r jsonb := COALESCE(new_row, old_row);
BEGIN
    IF TG_OP = 'UPDATE' AND new_row - 'heartbeat_at' = old_row - 'heartbeat_at' THEN
        RETURN NULL;
    END IF;
    INSERT INTO test_audit (tbl, op, row_id, state, attempt) VALUES (
        -- A monthly partition (runs_p202611, runs_default) stands for its table.
        regexp_replace(TG_TABLE_NAME, '_(p[0-9]{6}|default)$', ''), TG_OP,
        COALESCE(r->>'id', r->>'holder'), r->>'state',
        COALESCE(r->>'attempt', r->>'token')::bigint);
    RETURN NULL;
END $$;
"""
TABLES = ("jobs", "runs", "task_runs", "leases", "fences")
#: Where an epoch begins: the lease row, or (a lease held in etcd or ZooKeeper) the fence row,
#: whose token changes only when a new leader checks in (an update to the same token changes
#: nothing, and is not recorded).
EPOCH_TABLES = ("leases", "fences")


def install(sql: Sql) -> None:
    sql(INSTALL)
    for table in TABLES:
        sql(
            f"CREATE TRIGGER test_audit AFTER INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION test_audit_row()"
        )


@dataclass(frozen=True, slots=True)
class Write:
    seq: int
    at: datetime
    app: str
    table: str
    op: str
    row_id: str | None
    state: str | None
    attempt: int | None


def writes(sql: Sql, *, app: str | None = None, table: str | None = None) -> list[Write]:
    """Recorded writes, in the order they were made (``seq``), by writer and table."""
    rows = sql(
        "SELECT seq, at, app, tbl, op, row_id, state, attempt FROM test_audit "
        "WHERE (%s::text IS NULL OR app = %s) AND (%s::text IS NULL OR tbl = %s) ORDER BY seq",
        app, app, table, table,
    )  # fmt: skip
    return [Write(*row) for row in rows]


def epochs(sql: Sql) -> list[Write]:
    """The lease writes that began an epoch (a takeover, or a first acquisition)."""
    began: list[Write] = []
    for w in (w for w in writes(sql) if w.table in EPOCH_TABLES):
        if not began or began[-1].attempt != w.attempt:
            began.append(w)
    return began


def stale_leader_writes(sql: Sql) -> list[Write]:
    """Writes of a scheduler made after another replica had taken the lease from it.

    A fenced write holds the lease row (``FOR SHARE``) from its check to its commit, so a
    takeover's update, and its audit row, come after every write it fences out. Every
    scheduler write must therefore come after an epoch that its own process began, with no
    other process's epoch in between (``seq`` orders the audit rows as they were made).
    """
    began = epochs(sql)
    stale = []
    for w in writes(sql):
        if not w.app.startswith("scheduler-") or w.table in EPOCH_TABLES:
            continue
        current = [e for e in began if e.seq < w.seq]
        if not current or current[-1].app != w.app:
            stale.append(w)
    return stale
