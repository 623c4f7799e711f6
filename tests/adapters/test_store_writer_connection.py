"""SQLite's writer keeps its one connection between transactions (engine.HeldConnection):
the same connection serves each write, a failed write leaves it usable, a migration or a
close gives it back to the pool. A small write runs on the caller's thread while the writer
thread is idle, and queues behind it while it is in a transaction."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.helpers import make_job
from tickwork.store import open_store, transactions
from tickwork.store.engine import Engines, HeldConnection, WriterBusy, create_engines
from tickwork.store.sql import SqlStore
from tickwork.store.transactions import INLINE_ROWS, _transaction


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[Engines]:
    made = create_engines(f"sqlite:///{tmp_path / 'w.db'}")
    yield made
    made.dispose()


def _driver(conn: sa.Connection) -> object:
    return conn.connection.driver_connection


def _count(conn: sa.Connection) -> int:
    return int(conn.exec_driver_sql("SELECT count(*) FROM t").scalar_one())


def test_writes_share_one_connection_and_a_failed_one_rolls_back(engines: Engines) -> None:
    held = engines.held
    assert isinstance(held, HeldConnection)
    first = engines.writers.submit(_transaction, held, _driver).result()
    engines.writers.submit(
        _transaction, held, lambda c: c.exec_driver_sql("CREATE TABLE t (n int)")
    ).result()

    def insert_then_fail(conn: sa.Connection) -> None:
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        raise RuntimeError("after the insert")

    with pytest.raises(RuntimeError):
        engines.writers.submit(_transaction, held, insert_then_fail).result()
    assert engines.writers.submit(_transaction, held, _driver).result() is first
    assert engines.writers.submit(_transaction, held, _count).result() == 0


async def test_a_store_migrates_and_closes_after_writes(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 's.db'}")
    await store.migrate()
    job = make_job("written", now=datetime.now(UTC))
    await store.create_jobs([(job, [])])
    await store.migrate()  # takes the pool's one writer connection: the kept one is given back
    found = await store.get_job("written")
    assert found is not None and found.id == job.id
    await store.close()


def test_disposing_twice_is_harmless(tmp_path: Path) -> None:
    made = create_engines(f"sqlite:///{tmp_path / 'd.db'}")
    assert made.held is not None
    made.writers.submit(_transaction, made.held, _driver).result()
    made.dispose()
    made.dispose()


def _hold_writer(engines: Engines) -> tuple[threading.Event, threading.Event, object]:
    """A transaction on the writer thread that stays open until ``release`` is set."""
    assert engines.held is not None
    inside, release = threading.Event(), threading.Event()

    def hold(conn: sa.Connection) -> None:
        inside.set()
        assert release.wait(10)

    future = engines.writers.submit(_transaction, engines.held, hold)
    assert inside.wait(10)
    return inside, release, future


def test_run_now_refuses_while_the_writer_thread_is_in_a_transaction(engines: Engines) -> None:
    held = engines.held
    assert held is not None
    _, release, future = _hold_writer(engines)
    with pytest.raises(WriterBusy):
        held.run_now(_driver)
    release.set()
    future.result()  # type: ignore[attr-defined]
    assert held.run_now(_driver) is engines.writers.submit(_transaction, held, _driver).result()


async def test_a_small_write_runs_here_while_the_writer_is_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transactions, "INLINE_QUIET", 0.0)
    store = await open_store(f"sqlite:///{tmp_path / 'i.db'}")
    assert isinstance(store, SqlStore)
    try:
        await store.migrate()
        here = threading.get_ident()

        def where(conn: sa.Connection) -> int:
            return threading.get_ident()

        assert await store._write(where, rows=1) == here
        assert await store._write_alone(where, rows=INLINE_ROWS) == here
        assert await store._write(where, rows=INLINE_ROWS + 1) != here  # too big: the writer
        assert await store._write(where) != here  # size not known: the writer
        # Writes coming closer together than INLINE_QUIET go through the writer thread too,
        # but not one a task run's start waits on.
        monkeypatch.setattr(transactions, "INLINE_QUIET", 3600.0)
        assert await store._write(where, rows=1) != here
        assert await store._write_alone(where, rows=1, starts=True) == here
    finally:
        await store.close()


async def test_a_small_write_queues_behind_a_busy_writer(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'q.db'}")
    assert isinstance(store, SqlStore)
    try:
        await store.migrate()
        _, release, _ = _hold_writer(store._engines)

        def where(conn: sa.Connection) -> int:
            return threading.get_ident()

        queued = asyncio.ensure_future(store._write(where, rows=1))
        await asyncio.sleep(0)  # let it try: it must wait for the writer, not fail or run here
        assert not queued.done()
        release.set()
        assert await queued != threading.get_ident()
    finally:
        await store.close()
