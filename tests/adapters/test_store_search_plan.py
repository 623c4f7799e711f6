"""The run search stays an index range scan at scale: EXPLAIN on PostgreSQL with 200k runs
spread over the monthly partitions of the last 90 days (ids made as ``tickwork.ids`` does)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from tickwork.ports import TimeWindow
from tickwork.store.runs import encode_cursor, runs_query
from tickwork.store.sql import SqlStore

pytestmark = pytest.mark.postgres

ROWS = 200_000
JOBS = 100
T0 = datetime(2026, 1, 1, tzinfo=UTC)

_FILL = """
INSERT INTO jobs (id, name, schedule_kind, timezone, catchup, paused, queue, priority, retry,
                  tags, metadata, created_at, updated_at)
SELECT 'job' || j, 'job' || j, 'cron', 'UTC', false, false, 'default', 0, '{}', '[]', '{}',
       now(), now()
FROM generate_series(1, :jobs) AS j;
INSERT INTO runs (id, job_id, job_name, logical_date, state, trigger, created_at, started_at)
SELECT lpad(to_hex(CAST(:ms0 AS bigint) + i * CAST(:step AS bigint)), 12, '0')
       || lpad(to_hex(i), 20, '0'),
       'job' || (1 + i % :jobs), 'job' || (1 + i % :jobs),
       :t0 + i * interval '1 minute', CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'success' END,
       'schedule', now(), :t0 + i * interval '1 minute'
FROM generate_series(1, :rows) AS i;
ANALYZE jobs;
ANALYZE runs;
"""


@pytest.fixture
async def filled(pg_store: SqlStore, pg_url: str) -> AsyncIterator[Connection]:
    now = datetime.now(UTC)
    start = now - timedelta(days=90)
    await pg_store.maintain_partitions(start, ahead=4)
    ms0 = int(start.timestamp() * 1000)
    params = {"jobs": JOBS, "rows": ROWS, "t0": T0, "ms0": ms0, "step": 90 * 86_400_000 // ROWS}
    engine = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        for statement in filter(str.strip, _FILL.split(";")):
            conn.execute(sa.text(statement), params)
    with engine.connect() as conn:
        yield conn
    engine.dispose()


def plan(conn: Connection, query: sa.Select[object]) -> str:
    """EXPLAIN of ``query`` with its parameters inlined, as PostgreSQL would run it."""
    dialect = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]
    sql = query.compile(dialect=dialect, compile_kwargs={"literal_binds": True})
    return "\n".join(conn.execute(sa.text(f"EXPLAIN {sql}")).scalars())


#: A sequential scan of a partition that holds rows (an empty partition, one of the months
#: created ahead, costs ``0.00..0.00`` and is fine to scan).
SEQ_SCAN = re.compile(r"Seq Scan on \S+ \S+  \(cost=(?!0\.00\.\.0\.00 )")

#: A plan node that sorts every match (``Sort  (cost=...``), unlike ``Incremental Sort``.
FULL_SORT = re.compile(r"(^|->  )Sort  \(", re.MULTILINE)
CURSOR = encode_cursor(datetime(2026, 3, 1, tzinfo=UTC), "run00085000")
WINDOW = TimeWindow(logical_from=datetime(2026, 2, 1, tzinfo=UTC))

CASES = {
    "newest": runs_query(None, None, None),
    "next page": runs_query(None, None, CURSOR),
    "by job": runs_query("job7", None, None),
    "by job, next page": runs_query("job7", None, CURSOR),
    "by logical window": runs_query(None, None, None, WINDOW),
    "by state": runs_query(None, "failed", None),
}
#: Two equality filters: the planner may pick a bitmap scan of the job's index range and sort
#: the (few) matches; still bounded by one job's runs, never the whole table.
BOUNDED = {"by job and state, next page": runs_query("job7", "failed", CURSOR)}


def test_run_search_plans_are_backward_index_scans_without_sort(filled: Connection) -> None:
    for case, query in CASES.items():
        text = plan(filled, query.limit(51))
        print(f"\n-- {case}\n{text}")
        assert "Index Scan Backward" in text, (case, text)
        assert not SEQ_SCAN.search(text), (case, text)
        # Ties on logical_date may be ordered by id in a streaming "Incremental Sort" over
        # the presorted index (state filter); a full Sort of the matches would not scale.
        assert not FULL_SORT.search(text), (case, text)
    for case, query in BOUNDED.items():
        text = plan(filled, query.limit(51))
        print(f"\n-- {case}\n{text}")
        assert not SEQ_SCAN.search(text) and "Index Cond: (((job_id)" in text, (case, text)
