"""The scheduler's per-pass queries and the worker's per-claim statements cost the same with
100,000 pending task runs as with none: EXPLAIN ANALYZE on PostgreSQL shows every scan of a
table read by an index, a few rows deep (never a walk over the pending rows or a sort of
them), at a plan cost below PostgreSQL's default ``jit_above_cost``; and the store's
connections run with JIT off whatever the server's setting."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection

from tests.pg import libpq_url
from tickwork.store import dispatch, facts, jobs, next_work, pg_dispatch, pg_hot
from tickwork.store.engine import normalize_url
from tickwork.store.sql import SqlStore

pytestmark = pytest.mark.postgres

PENDING = 100_000
#: PostgreSQL's default ``jit_above_cost``: a plan that costs less is never JIT-compiled.
JIT_ABOVE_COST = 100_000
#: Rows any one scan may touch (read or filter out) in these plans.
MAX_ROWS_TOUCHED = 200
#: Pages any one scan may read: a walk over the 100,000 pending rows' index entries reads
#: hundreds (880 for the due index), a lookup a few per partition.
MAX_PAGES_READ = 200

FILL = """
CREATE TEMP TABLE p AS
SELECT i, lpad(to_hex(ms0 + i), 12, '0') || lpad(to_hex(i), 20, '0') AS tr,
       lpad(to_hex(ms0 + i), 12, '0') || lpad(to_hex(i), 20, '1') AS run,
       lpad(to_hex(ms0 + i), 12, '0') || lpad(to_hex(i), 20, '2') AS job,
       now() + interval '2 days' + i * interval '1 ms' AS due
FROM generate_series(1, %(n)s) AS i,
     (SELECT (extract(epoch FROM now()) * 1000)::bigint - %(n)s - 60000 AS ms0) AS m;
INSERT INTO jobs (id, name, schedule_kind, "at", timezone, catchup, paused, queue, priority,
                  retry, tags, metadata, created_at, updated_at)
SELECT job, 'pending-' || i, 'at', due, 'UTC', false, false, 'default', 0, '{}', '[]', '{}',
       now(), now() FROM p;
INSERT INTO runs (id, job_id, job_name, logical_date, state, trigger, created_at)
SELECT run, job, 'pending-' || i, due, 'scheduled', 'schedule', now() FROM p;
INSERT INTO task_runs (id, run_id, job_id, job_name, task_name, kind, config, state, attempt,
                       retry, due_at, logical_date, queue, priority, upstream, cancel_requested)
SELECT tr, run, job, 'pending-' || i, 'main', 'shell', '{}',
       CASE WHEN i %% 1000 = 0 THEN 'up_for_retry' ELSE 'scheduled' END, 1, '{}', due, due,
       'default', 0, '[]', false FROM p;
ANALYZE jobs; ANALYZE runs; ANALYZE task_runs
"""


@pytest.fixture
async def pending(pg_store: SqlStore, pg_url: str) -> AsyncIterator[Connection]:
    await pg_store.maintain_partitions(datetime.now(UTC))
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as admin:
        for statement in filter(str.strip, FILL.split(";")):
            admin.execute(statement, {"n": PENDING})
    engine = sa.create_engine(normalize_url(pg_url))
    with engine.connect() as conn:
        conn.exec_driver_sql("SET jit = off")  # EXPLAIN ANALYZE compiles nothing either way
        yield conn
    engine.dispose()


def _explain(conn: Connection, statement: str, parameters: Any) -> dict[str, Any]:
    document = conn.exec_driver_sql(
        f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", parameters
    )
    plan: dict[str, Any] = document.scalar_one()[0]["Plan"]
    conn.rollback()  # the statement ran: undo what it wrote
    return plan


def plans_of(conn: Connection, call: Callable[[Connection], object]) -> list[dict[str, Any]]:
    """The analyzed plans of the statements ``call`` runs, with its parameters."""
    seen: list[tuple[str, Any]] = []

    def record(*args: Any) -> None:
        seen.append((args[2], args[3]))

    event.listen(conn, "before_cursor_execute", record)
    try:
        call(conn)
    finally:
        event.remove(conn, "before_cursor_execute", record)
    conn.rollback()
    return [_explain(conn, statement, parameters) for statement, parameters in seen]


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def touched(node: dict[str, Any]) -> float:
    """Rows a node read, kept or filtered out, over all its loops."""
    rows = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
    return float(rows * max(node.get("Actual Loops", 1), 1))


def pages(node: dict[str, Any]) -> int:
    """Pages a node read (from the buffer cache or the disk), over all its loops: unlike its
    rows, this counts the index entries an index scan walks past without a condition on the
    index's leading column."""
    return int(node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0))


def assert_flat(name: str, plan: dict[str, Any], *, cost: bool = True) -> None:
    assert not cost or plan["Total Cost"] < JIT_ABOVE_COST, (name, plan["Total Cost"])
    for node in nodes(plan):
        relation = node.get("Relation Name", "")
        if relation:
            assert pages(node) <= MAX_PAGES_READ, (name, relation, pages(node))
            assert node["Node Type"] != "Seq Scan" or touched(node) == 0, (name, node)
            assert touched(node) <= MAX_ROWS_TOUCHED, (name, relation, touched(node))
        if node["Node Type"] == "Sort":
            assert touched(node) <= MAX_ROWS_TOUCHED, (name, "sort", touched(node))


NOW = datetime.now(UTC)
PER_PASS: dict[str, Callable[[Connection], object]] = {
    "next_due_at": dispatch.next_due_at,
    "due_task_runs": lambda c: dispatch.due_task_runs(c, NOW, 100),
    "due_task_runs ahead": lambda c: dispatch.due_task_runs(
        c, NOW + timedelta(minutes=5), 100, NOW
    ),
    "queued_task_runs": lambda c: dispatch.queued_task_runs(c, NOW, 100),
    "stale_running": lambda c: dispatch.stale_running(c, NOW, 100),
    "due_cron_jobs": lambda c: jobs.due_cron_jobs(c, NOW, 100),
    "next_fire_at": jobs.next_fire_at,
    "queue facts (a metrics scrape)": lambda c: facts.read_facts(c, NOW, NOW - timedelta(hours=1)),
}


def test_the_scheduler_s_passes_do_not_grow_with_pending_work(pending: Connection) -> None:
    for name, call in PER_PASS.items():
        for plan in plans_of(pending, call):
            assert_flat(name, plan)


def test_claims_heartbeats_and_completions_do_not_grow_with_pending_work(
    pending: Connection,
) -> None:
    some = pending.exec_driver_sql("SELECT id FROM task_runs ORDER BY due_at LIMIT 50").scalars()
    keys = [(task_run_id, 1) for task_run_id in some]
    pending.rollback()
    for name, (statement, parameters) in {
        "claim": pg_dispatch.claim_statement(keys, "w1", NOW),
        "heartbeat": pg_dispatch.heartbeat_statement(keys, "w1", NOW),
        "lock for completion": pg_dispatch.lock_statement(keys),
    }.items():
        assert_flat(name, _explain(pending, statement, parameters))


async def test_the_store_s_connections_run_without_jit(pg_store: SqlStore) -> None:
    setting = await pg_store._read(lambda conn: conn.exec_driver_sql("SHOW jit").scalar())
    assert setting == "off"


#: The scheduler's statements read planned once (``SqlTransactions._read_planned``).
PLANNED: dict[str, tuple[sa.Select[Any], dict[str, Any]]] = {
    "next_work": (next_work.statement(), {"after": NOW}),
    "queued_task_runs": (dispatch.QUEUED_BEFORE, {"before": NOW, "limit": 100}),
    "stale_running": (dispatch.STALE_BEFORE, {"before": NOW, "limit": 100}),
}


@pytest.mark.parametrize("name", PLANNED)
def test_the_scheduler_s_reads_planned_once_do_not_grow_with_pending_work(
    pending: Connection, name: str
) -> None:
    # These run prepared, with the generic plan (``pg_hot.read_planned``): that plan, made
    # without the parameters' values, must stay an index lookup too.
    query, params = PLANNED[name]
    sql, own = pg_hot.text_of(query)
    raw = pending.connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    plans: list[str] = []
    raw.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
    for setting in (
        "LOAD 'auto_explain'",
        "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_analyze = on",
        "SET auto_explain.log_buffers = on",
        "SET auto_explain.log_format = json",
        "SET auto_explain.log_level = notice",
        "SET plan_cache_mode = force_generic_plan",
    ):
        raw.execute(setting)
    for _ in range(2):  # the second execution reuses the plan the first one made
        raw.execute(sql, own | params, prepare=True).fetchall()
    pending.rollback()  # the settings with it
    plan = json.loads(plans[-1][plans[-1].index("{") :])["Plan"]
    # Estimated without the values, its cost may be far above ``jit_above_cost`` (a guess of
    # a third of the pending rows); what it reads is a few pages. The connections it runs on
    # have JIT off (``test_the_store_s_direct_connections_run_without_jit``).
    assert_flat(f"{name} (generic plan)", plan, cost=False)


async def test_the_store_s_direct_connections_run_without_jit(pg_store: SqlStore) -> None:
    query = sa.select(sa.func.current_setting("jit"))
    assert await pg_store._d.read_planned(query, {}) == [("off",)]
