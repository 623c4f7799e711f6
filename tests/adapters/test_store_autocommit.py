"""PostgreSQL reads and single-statement writes run in autocommit (no BEGIN/COMMIT round trips);
multi-statement writes stay one transaction, also on a connection that served autocommit work."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa
from psycopg.pq import TransactionStatus

from tickwork.store.engine import Engines, create_engines
from tickwork.store.transactions import _transaction

pytestmark = pytest.mark.postgres
INSERT = "INSERT INTO autocommit_probe VALUES"


@pytest.fixture
def engines(pg_url: str) -> Iterator[Engines]:
    made = create_engines(pg_url)
    with made.write.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS autocommit_probe")
        conn.exec_driver_sql("CREATE TABLE autocommit_probe (n int)")
    yield made
    with made.write.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS autocommit_probe")
    made.dispose()


def _in_transaction(conn: sa.Connection) -> bool:
    """Whether a statement run now runs inside an explicit transaction block."""
    conn.exec_driver_sql("SELECT 1")
    raw = conn.connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    return raw.info.transaction_status != TransactionStatus.IDLE


def test_reads_and_lone_writes_autocommit_writes_do_not(engines: Engines) -> None:
    assert _transaction(engines.read, _in_transaction) is False
    assert _transaction(engines.alone, _in_transaction) is False
    assert _transaction(engines.write, _in_transaction) is True


def test_a_failed_write_rolls_back_on_a_connection_that_served_autocommit(
    engines: Engines,
) -> None:
    for _ in range(3):  # the pool's connections, each used in autocommit first
        _transaction(engines.alone, lambda c: c.exec_driver_sql(f"{INSERT} (1)"))

    def two_then_fail(conn: sa.Connection) -> None:
        conn.exec_driver_sql(f"{INSERT} (2)")
        conn.exec_driver_sql(f"{INSERT} (2)")
        raise RuntimeError("fail after two statements")

    with pytest.raises(RuntimeError):
        _transaction(engines.write, two_then_fail)
    count = _transaction(
        engines.read, lambda c: c.exec_driver_sql("SELECT count(*) FROM autocommit_probe").scalar()
    )
    assert count == 3  # the lone writes stayed, the failed transaction left nothing
