"""PostgreSQL connections the server dropped: pinged when idle, replaced after a failure;
for the engine's transactions and for the direct single-enqueue path (``pg_direct``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from tests.contract.factory import T0, make_job, make_run
from tests.pg import libpq_url
from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import RunTrigger
from tickwork.ports import RunCopy
from tickwork.store import SqlStore, open_store
from tickwork.store import engine as engine_module

pytestmark = pytest.mark.postgres


@pytest.fixture
async def used_store(pg_url: str) -> AsyncIterator[SqlStore]:
    """A store whose pool holds a connection that served a transaction."""
    store = await open_store(pg_url)
    await store.truncate_all()
    await store.create_jobs([(JOB, [])])
    assert await store.get_job("nothing") is None
    await _enqueue(store, "warm")
    yield store
    await store.close()


JOB = make_job("q")


async def _enqueue(store: SqlStore, run_id: str) -> None:
    template = make_run(JOB, T0, trigger=RunTrigger.ENQUEUE)
    copy = RunCopy(template, run_id, (f"{run_id}-t",), (template.task_runs[0].config,))
    await store.enqueue_runs([copy], planned_from=JOB)
    assert await store.get_run(run_id) is not None


def _drop_connections(url: str) -> int:
    """End every other session on the database (and wait for them to end)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_an_idle_connection_the_server_dropped_is_replaced_unseen(
    used_store: SqlStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "PG_PING_IDLE", 0.0)  # every pooled one counts as idle
    assert _drop_connections(pg_url) >= 2  # the engine's and the direct writer's
    assert await used_store.get_job("nothing") is None
    await _enqueue(used_store, "after")


async def test_a_busy_connection_the_server_dropped_fails_once_then_is_replaced(
    used_store: SqlStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "PG_PING_IDLE", 3600.0)  # never pinged
    assert _drop_connections(pg_url) >= 2
    with pytest.raises(StoreUnavailable):
        await used_store.get_job("nothing")
    assert await used_store.get_job("nothing") is None
    with pytest.raises(StoreUnavailable):
        await _enqueue(used_store, "lost")
    await _enqueue(used_store, "after")


def test_the_direct_path_follows_the_store_to_another_event_loop(pg_url: str) -> None:
    async def open_and_enqueue() -> SqlStore:
        store = await open_store(pg_url)
        await store.truncate_all()
        await store.create_jobs([(JOB, [])])
        await _enqueue(store, "first-loop")
        return store

    store = asyncio.run(open_and_enqueue())

    async def enqueue_and_close() -> None:
        await _enqueue(store, "second-loop")  # the first loop's connection is closed, not used
        await store.close()

    asyncio.run(enqueue_and_close())
