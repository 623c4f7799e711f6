"""SQLite's writer keeps its one connection between transactions (engine.HeldConnection):
the same connection serves each write, a failed write leaves it usable, a migration or a
close gives it back to the pool."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.helpers import make_job
from tickwork.store import open_store
from tickwork.store.engine import Engines, HeldConnection, create_engines
from tickwork.store.transactions import _transaction


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
