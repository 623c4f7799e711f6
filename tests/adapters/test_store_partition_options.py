"""A new month's partition takes the newest month's storage parameters (deploy/README.md's
per-partition autovacuum settings): PostgreSQL takes none on a partitioned table, so without
this every month made ahead by maintenance would fall back to the server's 20 %."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.pg import PostgresServer, create_database, drop_database
from tickwork.store import open_store
from tickwork.store.engine import normalize_url
from tickwork.store.partitions import (
    PARTITIONED,
    add_months,
    create_months,
    month_start,
    partition_months,
    partition_name,
)

pytestmark = pytest.mark.postgres

AUTOVACUUM = "autovacuum_vacuum_scale_factor=0.02"


@pytest.fixture
def fresh_db(postgres_server: PostgresServer) -> Iterator[str]:
    if postgres_server.url is None:
        pytest.skip("PostgreSQL unavailable")
    name = f"tickwork_partopts_{os.getpid()}_{os.urandom(3).hex()}"
    url = create_database(postgres_server.url, name)
    yield url
    drop_database(postgres_server.url, name)


def _options(conn: sa.Connection, name: str) -> list[str] | None:
    query = sa.text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:name)")
    options: list[str] | None = conn.execute(query, {"name": name}).scalar()
    return options


async def test_a_new_month_takes_the_newest_months_storage_parameters(fresh_db: str) -> None:
    store = await open_store(fresh_db)
    try:
        await store.migrate()
    finally:
        await store.close()
    engine = sa.create_engine(normalize_url(fresh_db))
    try:
        with engine.begin() as conn:
            newest = max(partition_months(conn, "task_runs"))
            conn.exec_driver_sql(
                f"ALTER TABLE {partition_name('task_runs', newest)} SET ({AUTOVACUUM})"
            )
            ahead = add_months(newest, 1)
            assert month_start(datetime.now(UTC)) < ahead
            created = create_months(conn, [ahead])
        with engine.connect() as conn:
            assert set(created) == {partition_name(t, ahead) for t in PARTITIONED}
            assert _options(conn, partition_name("task_runs", ahead)) == [AUTOVACUUM]
            assert _options(conn, partition_name("runs", ahead)) is None  # none set: none taken
    finally:
        engine.dispose()
