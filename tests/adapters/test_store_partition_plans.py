"""The watcher's and reaper's queries on the partitioned ``task_runs`` are index scans of the
partial indexes, and lookups by id read one partition: EXPLAIN (FORMAT JSON) on PostgreSQL
with 150k task runs over three months, nearly all finished."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection

from tickwork.store import dispatch, pg_dispatch
from tickwork.store import runs as run_queries
from tickwork.store.engine import normalize_url
from tickwork.store.sql import SqlStore

pytestmark = pytest.mark.postgres

ROWS = 150_000
NOW = datetime(2026, 3, 1, tzinfo=UTC)

_FILL = """
INSERT INTO jobs (id, name, schedule_kind, timezone, catchup, paused, queue, priority, retry,
                  tags, metadata, created_at, updated_at)
SELECT 'job' || j, 'job' || j, 'cron', 'UTC', false, false, 'default', 0, '{}', '[]', '{}',
       now(), now()
FROM generate_series(1, 50) AS j;
INSERT INTO task_runs (id, run_id, job_id, job_name, task_name, kind, config, state, attempt,
                       retry, due_at, logical_date, queue, priority, upstream, queued_at,
                       heartbeat_at, finished_at, cancel_requested)
SELECT lpad(to_hex(CAST(:ms0 AS bigint) + i * CAST(:step AS bigint)), 12, '0')
         || lpad(to_hex(i), 20, '0'),
       lpad(to_hex(CAST(:ms0 AS bigint) + i * CAST(:step AS bigint)), 12, '0')
         || lpad(to_hex(i), 20, '1'),
       'job' || (1 + i % 50), 'job' || (1 + i % 50), 'main', 'shell', '{}',
       CASE WHEN i % 1000 = 1 THEN 'scheduled' WHEN i % 1000 = 2 THEN 'queued'
            WHEN i % 1000 = 3 THEN 'running' WHEN i % 100 = 4 THEN 'failed'
            ELSE 'success' END,
       1, '{}', :now - (i % 600) * interval '1 second', :now, 'default', 0, '[]',
       :now - (i % 600) * interval '1 second', :now - (i % 600) * interval '1 second',
       :now, false
FROM generate_series(1, :rows) AS i;
ANALYZE jobs;
ANALYZE task_runs;
"""


@pytest.fixture
async def filled(pg_store: SqlStore, pg_url: str) -> AsyncIterator[Connection]:
    start = datetime.now(UTC) - timedelta(days=60)
    await pg_store.maintain_partitions(start, ahead=3)
    params = {
        "ms0": int(start.timestamp() * 1000),
        "step": 60 * 86_400_000 // ROWS,
        "rows": ROWS,
        "now": NOW,
    }
    engine = sa.create_engine(normalize_url(pg_url))
    with engine.begin() as conn:
        for statement in filter(str.strip, _FILL.split(";")):
            conn.execute(sa.text(statement), params)
    with engine.connect() as conn:
        yield conn
    engine.dispose()


def plan_of(conn: Connection, call: Callable[[Connection], object]) -> list[dict[str, Any]]:
    """The JSON plans of the statements ``call`` runs, with the parameters it ran them with."""
    seen: list[tuple[str, Any]] = []

    def record(*args: Any) -> None:
        seen.append((args[2], args[3]))

    event.listen(conn, "before_cursor_execute", record)
    try:
        call(conn)
    finally:
        event.remove(conn, "before_cursor_execute", record)
    plans = []
    for statement, parameters in seen:
        explained = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", parameters)
        document = explained.scalar_one()
        plans.append(document[0]["Plan"])
    conn.rollback()
    return plans


def scans(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "Relation Name" in node:
        yield node
    for child in node.get("Plans", []):
        yield from scans(child)


def task_run_scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        s
        for s in scans(plan)
        if s["Relation Name"].startswith("task_runs_") and s.get("Alias", "").startswith("task")
    ]


def empty_partitions(conn: Connection) -> set[str]:
    names = conn.execute(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'task_runs'::regclass"
        )
    ).scalars()
    empty = {
        n for n in names if conn.execute(sa.text(f"SELECT NOT EXISTS (SELECT 1 FROM {n})")).scalar()
    }
    conn.rollback()
    return empty


def assert_partial_index_scans(plan: dict[str, Any], index_suffix: str, empty: set[str]) -> None:
    found = task_run_scans(plan)
    assert found, plan
    for node in found:
        # An empty partition (a month ahead, DEFAULT) may be scanned whole; one with rows
        # must be read through the query's partial index.
        if node["Node Type"] == "Seq Scan":
            assert node["Relation Name"] in empty, node
            continue
        index = node.get("Index Name") or node["Plans"][0]["Index Name"]
        assert index.endswith(index_suffix), node


CASES: dict[str, tuple[Callable[[Connection], object], str]] = {
    "due_task_runs": (lambda c: dispatch.due_task_runs(c, NOW, 100), "_due_at_idx"),
    "due_task_runs ahead": (
        lambda c: dispatch.due_task_runs(c, NOW + timedelta(minutes=5), 100, NOW),
        "_due_at_idx",
    ),
    "next_due_at": (dispatch.next_due_at, "_due_at_idx"),
    "queued_task_runs": (lambda c: dispatch.queued_task_runs(c, NOW, 100), "_queued_at_id_idx"),
    "stale_running": (lambda c: dispatch.stale_running(c, NOW, 100), "_heartbeat_at_id_idx"),
    "dead_letters": (
        lambda c: run_queries.dead_letters(c, None, 50, None),
        "_finished_at_id_idx",
    ),
}


def test_watcher_and_reaper_read_the_partial_indexes(filled: Connection) -> None:
    empty = empty_partitions(filled)
    # The months the fixture filled are not empty (other tests of the session may have made
    # more empty months: a count would depend on which ran first in this process).
    today = datetime.now(UTC)
    months = {f"task_runs_p{today - timedelta(days=d):%Y%m}" for d in (2, 30, 58)}
    assert months and not months & empty, (months, empty)
    for case, (call, suffix) in CASES.items():
        plan = plan_of(filled, call)[0]
        print(f"\n-- {case}: {[(s['Relation Name'], s['Node Type']) for s in scans(plan)]}")
        assert_partial_index_scans(plan, suffix, empty)


def test_lookups_by_id_read_one_partition(filled: Connection) -> None:
    some_id = filled.execute(sa.text("SELECT id FROM task_runs WHERE state = 'queued'")).scalar()
    assert some_id is not None
    filled.rollback()
    plan = plan_of(filled, lambda c: run_queries.get_task_run(c, some_id))[0]
    touched = {s["Relation Name"] for s in task_run_scans(plan)}
    assert len(touched) == 1, touched  # pruned to the id's month
    # The claim (psycopg, array parameters): each partition with rows is read by primary
    # key, and only the id's month is read at all.
    statement, params = pg_dispatch.claim_statement([(some_id, 1)], "w1", NOW)
    analyzed = filled.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", params)
    plan = analyzed.scalar_one()[0]["Plan"]
    filled.rollback()
    read = [s for s in scans(plan) if s["Relation Name"].startswith("task_runs_")]
    empty = empty_partitions(filled)  # may be scanned whole
    assert read and all(s["Node Type"] == "Index Scan" or s["Relation Name"] in empty for s in read)
    assert {s["Relation Name"] for s in read if s.get("Actual Loops", 0) > 0} <= touched
