"""The SQL store's schema, migrations, engine setup and time handling."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import create_engine

from tests.contract.factory import make_job, make_run
from tests.contract.schema_diff import schema_diff as _schema_diff
from tickwork.core.errors import Conflict, ValidationError
from tickwork.store import SqlStore, open_store
from tickwork.store.engine import normalize_url
from tickwork.store.migrate import current_revision, head_revision


async def test_migrated_schema_equals_metadata_and_migrate_is_idempotent(
    store: SqlStore, store_url: str
) -> None:
    await store.migrate()
    await store.migrate()
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.connect() as conn:
            assert _schema_diff(conn) == []
            assert current_revision(conn) == head_revision()
    finally:
        engine.dispose()


async def test_datetimes_come_back_as_aware_utc_instants(store: SqlStore) -> None:
    plus_five = timezone(timedelta(hours=5, minutes=30))
    local = datetime(2026, 7, 1, 9, 30, 0, 1, tzinfo=plus_five)
    job = make_job("tz", cron="0 * * * *", next_fire_at=local)
    await store.create_jobs([(job, [make_run(job, local)])])
    stored = await store.get_job("tz")
    assert stored is not None
    assert stored.next_fire_at == local
    assert stored.next_fire_at is not None
    assert stored.next_fire_at.tzinfo is UTC
    assert stored.next_fire_at.hour == 4
    (run,) = (await store.list_runs()).runs
    assert run.logical_date.tzinfo is UTC


async def test_naive_datetimes_are_refused(store: SqlStore) -> None:
    with pytest.raises(Exception, match="naive datetime"):
        await store.due_task_runs(datetime(2026, 1, 1), 10)


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("sqlite:///x.db", "sqlite+pysqlite"),
        ("sqlite://", "sqlite+pysqlite"),
        ("sqlite+aiosqlite:///x.db", "sqlite+pysqlite"),
        ("postgres://u@h/db", "postgresql+psycopg"),
        ("postgresql://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
    ],
)
def test_normalize_url_selects_the_async_driver(given: str, driver: str) -> None:
    assert normalize_url(given).drivername == driver


@pytest.mark.parametrize("given", ["mysql://u@h/db", "postgresql+asyncpg://u@h/db", "nonsense"])
def test_normalize_url_refuses_unsupported_urls(given: str) -> None:
    with pytest.raises(ValidationError) as caught:
        normalize_url(given)
    assert caught.value.field == "url"
    assert "sqlite:///path.db" in caught.value.reason


async def test_in_memory_store_serves_concurrent_callers() -> None:
    store = await open_store("sqlite://")
    try:
        await store.migrate()
        jobs = [make_job(f"m{i}") for i in range(20)]
        await asyncio.gather(*(store.create_jobs([(j, [make_run(j)])]) for j in jobs))
        assert len(await store.list_jobs()) == 20
        assert len((await store.list_runs(limit=100)).runs) == 20
    finally:
        await store.close()


async def test_sqlite_file_store_is_in_wal_mode(sqlite_url: str) -> None:
    store = await open_store(sqlite_url)
    await store.list_jobs()  # opening a connection applies the pragmas
    await store.close()
    engine = create_engine(normalize_url(sqlite_url))
    try:
        with engine.connect() as conn:
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        assert mode == "wal"
    finally:
        engine.dispose()


async def test_store_enforces_foreign_keys(store: SqlStore) -> None:
    orphan = make_run(make_job("never-created"))
    with pytest.raises(Conflict) as caught:
        await store.create_runs([orphan])
    assert caught.value.field == "reference"
    assert await store.get_run(orphan.run.id) is None
