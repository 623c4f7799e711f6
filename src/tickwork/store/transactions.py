"""The store's transactions: each write in one transaction on the writer engine's threads,
each read in one snapshot on the readers'; connection failures become ``StoreUnavailable``,
unique violations ``Conflict``, a scheduler's writes carry their fence check."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from tickwork.core.errors import StoreUnavailable
from tickwork.ports import Fence
from tickwork.store import fences
from tickwork.store.common import conflict_from
from tickwork.store.dialect import Dialect
from tickwork.store.engine import Engines, HeldConnection, WriterBusy

T = TypeVar("T")

#: The most rows a SQLite write may touch to run on the calling (event loop's) thread while
#: the writer is idle (``_inline``): a claim, start, heartbeat or completion of a few task
#: runs takes ~0.1-0.5 ms there, against a thread hop each way through the writer thread (a
#: wake-up of that thread, then of the loop: each a scheduling delay on a busy machine, and
#: 60-190 µs of CPU for a one-row write, bench/README.md).
INLINE_ROWS = 16
#: ... and, unless a task run's start waits on it (a claim, a start), only if the writer's
#: last transaction ended this long ago (seconds). Writes that come closer together are a
#: load, and go through the writer thread: what queues up during one hop forms the next
#: batch (``runtime.batch``), where inline writes, returning at once, would leave every
#: completion a batch of its own (W1 measured 1.8x the transactions).
INLINE_QUIET = 0.005


class SqlTransactions:
    """Runs query-module functions ``(conn) -> T`` in transactions; ``SqlStore`` builds on it."""

    def __init__(self, engines: Engines, dialect: Dialect) -> None:
        self._engines = engines
        self._d = dialect

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._d.name

    async def _write(
        self, work: Callable[[Connection], T], *, rows: int = 0, starts: bool = False
    ) -> T:
        """``work`` in one write transaction. On SQLite, one of at most ``INLINE_ROWS``
        ``rows`` (0: not known) runs on this thread if the writer is idle (``_inline``):
        at once if a task run's start waits on it (``starts``), else after a quiet spell."""
        engines = self._engines
        if engines.held is not None and 0 < rows <= INLINE_ROWS:
            with contextlib.suppress(WriterBusy):
                return self._inline(engines.held, work, 0.0 if starts else INLINE_QUIET)
        return await self._run(engines.writers, engines.held or engines.write, work)

    async def _write_alone(
        self, work: Callable[[Connection], T], *, rows: int = 0, starts: bool = False
    ) -> T:
        """A write that is one statement (atomic by itself): PostgreSQL runs it in
        autocommit, one round trip instead of three (BEGIN, it, COMMIT). SQLite: ``_write``."""
        engines = self._engines
        if engines.held is not None:
            return await self._write(work, rows=rows, starts=starts)
        return await self._run(engines.writers, engines.alone, work)

    @staticmethod
    def _inline(held: HeldConnection, work: Callable[[Connection], T], quiet: float) -> T:
        # The writer's thread and this one share the connection under its lock; ``WriterBusy``
        # when the writer thread is in a transaction (the caller queues behind it instead).
        with _unavailable_raised():
            return _transaction(held, work, quiet=quiet)

    async def _read(self, work: Callable[[Connection], T]) -> T:
        return await self._run(self._engines.readers, self._engines.read, work)

    async def _read_planned(
        self, query: sa.Select[Any], params: Mapping[str, Any]
    ) -> list[tuple[Any, ...]]:
        """The rows of ``query`` (a constant statement the scheduler reads again and again),
        planned once on the event loop where the dialect can (``Dialect.read_planned``), else
        read the usual way; timestamps in UTC either way."""
        with contextlib.suppress(StoreUnavailable):  # read again below, on a sound connection
            rows = await self._d.read_planned(query, params)
            if rows is not None:
                return [tuple(map(_in_utc, row)) for row in rows]
        return await self._read(lambda conn: [tuple(r) for r in conn.execute(query, params)])

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
        with _unavailable_raised():
            return await loop.run_in_executor(threads, call)


def _in_utc(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not None and value.tzinfo is not UTC:
        return value.astimezone(UTC)
    return value


@contextlib.contextmanager
def _unavailable_raised() -> Iterator[None]:
    try:
        yield
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        # The connection failed (the server restarting, the network): the transaction
        # did not commit. Callers may retry; anything else is a bug and propagates.
        raise StoreUnavailable(f"database unavailable: {exc.orig or exc}") from exc
    except sa.exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise StoreUnavailable(f"database connection lost: {exc.orig or exc}") from exc
        raise


def _transaction(
    engine: Engine | HeldConnection, work: Callable[[Connection], T], *, quiet: float | None = None
) -> T:
    """Run ``work`` in one transaction (with ``quiet``: ``HeldConnection.run_now``); unique
    violations become ``Conflict`` here, at the edge."""
    try:
        if isinstance(engine, HeldConnection):
            return engine.run(work) if quiet is None else engine.run_now(work, quiet)
        with engine.begin() as conn:
            return work(conn)
    except IntegrityError as exc:
        conflict = conflict_from(exc)
        if conflict is None:
            raise
        raise conflict from None
