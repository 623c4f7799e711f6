"""The store's transactions: each write in one transaction on the writer engine's threads,
each read in one snapshot on the readers'; connection failures become ``StoreUnavailable``,
unique violations ``Conflict``, a scheduler's writes carry their fence check."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from tickwork.core.errors import StoreUnavailable
from tickwork.ports import Fence
from tickwork.store import fences
from tickwork.store.common import conflict_from
from tickwork.store.dialect import Dialect
from tickwork.store.engine import Engines, HeldConnection

T = TypeVar("T")


class SqlTransactions:
    """Runs query-module functions ``(conn) -> T`` in transactions; ``SqlStore`` builds on it."""

    def __init__(self, engines: Engines, dialect: Dialect) -> None:
        self._engines = engines
        self._d = dialect

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._d.name

    async def _write(self, work: Callable[[Connection], T]) -> T:
        engines = self._engines
        return await self._run(engines.writers, engines.held or engines.write, work)

    async def _write_alone(self, work: Callable[[Connection], T]) -> T:
        """A write that is one statement (atomic by itself): PostgreSQL runs it in
        autocommit, one round trip instead of three (BEGIN, it, COMMIT)."""
        engines = self._engines
        return await self._run(engines.writers, engines.held or engines.alone, work)

    async def _read(self, work: Callable[[Connection], T]) -> T:
        return await self._run(self._engines.readers, self._engines.read, work)

    def _fenced(
        self, fence: Fence | None, work: Callable[[Connection], T]
    ) -> Callable[[Connection], T]:
        """``work`` after the fence check, in the same transaction; unchanged without one."""
        if fence is None:
            return work

        def fenced(conn: Connection) -> T:
            fences.hold(conn, self._d, fence)
            return work(conn)

        return fenced

    @staticmethod
    async def _run(
        threads: ThreadPoolExecutor,
        engine: Engine | HeldConnection,
        work: Callable[[Connection], T],
    ) -> T:
        return await SqlTransactions._on_thread(threads, lambda: _transaction(engine, work))

    @staticmethod
    async def _on_thread(threads: ThreadPoolExecutor, call: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(threads, call)
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            # The connection failed (the server restarting, the network): the transaction
            # did not commit. Callers may retry; anything else is a bug and propagates.
            raise StoreUnavailable(f"database unavailable: {exc.orig or exc}") from exc
        except sa.exc.DBAPIError as exc:
            if exc.connection_invalidated:
                raise StoreUnavailable(f"database connection lost: {exc.orig or exc}") from exc
            raise


def _transaction(engine: Engine | HeldConnection, work: Callable[[Connection], T]) -> T:
    """Run ``work`` in one transaction; unique violations become ``Conflict`` here, at the edge."""
    try:
        if isinstance(engine, HeldConnection):
            return engine.run(work)
        with engine.begin() as conn:
            return work(conn)
    except IntegrityError as exc:
        conflict = conflict_from(exc)
        if conflict is None:
            raise
        raise conflict from None
