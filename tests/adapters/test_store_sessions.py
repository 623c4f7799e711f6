"""PostgreSQL sessions say which tickwork process holds them: ``application_name`` is
``tickwork-<kind>`` (``pg_stat_activity`` then counts connections per process kind, as
deploy/README.md's sizing advice does), unless the database URL or libpq's ``PGAPPNAME``
names its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tickwork.store import engine
from tickwork.store.sql import SqlStore, open_store

pytestmark = pytest.mark.postgres


@pytest.fixture
def scheduler_process() -> Iterator[None]:
    engine.name_sessions("scheduler")
    try:
        yield
    finally:
        engine._application_name = "tickwork"


async def _application_name(store: SqlStore) -> str:
    name = await store._read(lambda c: c.exec_driver_sql("SHOW application_name").scalar())
    return str(name)


async def test_a_process_s_sessions_carry_its_kind(pg_url: str, scheduler_process: None) -> None:
    store = await open_store(pg_url)
    try:
        assert await _application_name(store) == "tickwork-scheduler"
    finally:
        await store.close()


async def test_a_name_in_the_url_is_kept(pg_url: str, scheduler_process: None) -> None:
    separator = "&" if "?" in pg_url else "?"
    store = await open_store(f"{pg_url}{separator}application_name=billing-app")
    try:
        assert await _application_name(store) == "billing-app"
    finally:
        await store.close()


async def test_a_name_in_the_environment_is_kept(
    pg_url: str, scheduler_process: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGAPPNAME", "scheduler-2")
    store = await open_store(pg_url)
    try:
        assert await _application_name(store) == "scheduler-2"
    finally:
        await store.close()


async def test_without_a_kind_sessions_are_tickwork_s(pg_store: SqlStore) -> None:
    assert await _application_name(pg_store) == "tickwork"
