"""One-statement writes on the event loop, for the hot paths on PostgreSQL: the API's single
enqueue, the worker's claim, heartbeat and completion (``pg_hot``).

A store operation normally runs as a transaction on a worker thread (``engine``): a thread
hop each way plus SQLAlchemy's connection and transaction bookkeeping, about 110 µs of CPU
for a one-statement write, against 35 µs for the same statement on an asyncio psycopg
connection in autocommit mode (one round trip, no ``BEGIN``/``COMMIT``: a single statement
is atomic by itself). ``DirectWriter`` keeps a few such connections for writes that are one
statement (``execute``, or ``run`` for a few statements and their rows); when all are busy,
or on another event loop than theirs, it says so (``None``) and the caller takes the usual
path.

Failures are the store's: a connection that fails is dropped and the write raises
``StoreUnavailable`` (it did not commit, or the caller cannot know: the same as a
transaction whose connection fails); a unique or foreign-key violation raises SQLAlchemy's
``IntegrityError``, which the store maps like any other, and any other driver error (a bug)
SQLAlchemy's error for it, as the engine's path would. A connection idle over
``PG_PING_IDLE`` seconds is pinged before use, as the engine's are.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import sqlalchemy as sa
from psycopg.abc import PQGen
from psycopg.pq import TransactionStatus
from psycopg.waiting import READY_R, WAIT_R, Wait
from sqlalchemy.engine import URL

from tickwork.core.errors import StoreUnavailable
from tickwork.store import engine as engines

#: Connections kept per store (the API's single writes rarely overlap more than this).
DIRECT_CONNECTIONS = 4
CONNECT_TIMEOUT_S = 5
_INTERVAL = 0.1  # psycopg's own interrupt check interval, for the waits it still does
T = TypeVar("T")


class DirectWriter:
    """Up to DIRECT_CONNECTIONS autocommit ``psycopg.AsyncConnection`` s, made on demand."""

    def __init__(self, url: URL, size: int = DIRECT_CONNECTIONS) -> None:
        self._conninfo = engines.libpq_conninfo(url)
        self._size = size
        self._idle: list[tuple[psycopg.AsyncConnection[Any], float]] = []
        self._busy = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    async def execute(self, sql: str, params: tuple[Any, ...]) -> int | None:
        """Run one statement in autocommit mode; its row count, or None if no connection is
        free here (the caller uses the engine instead)."""

        async def rowcount(conn: psycopg.AsyncConnection[Any]) -> int:
            return (await conn.execute(sql, params)).rowcount

        return await self.run(rowcount)

    async def fetch(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]] | None:
        """Run one statement in autocommit mode, ``sql`` in PostgreSQL's own placeholders
        (``$1``, ...: a raw cursor, whose text psycopg does not parse); the rows it returns,
        or None if no connection is free here (the caller uses the engine instead)."""

        async def rows(conn: psycopg.AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            cursor = psycopg.AsyncRawCursor(conn)
            return await (await cursor.execute(sql, params)).fetchall()

        return await self.run(rows)

    async def run(
        self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]], *, ping: bool = True
    ) -> T | None:
        """``await work(conn)`` on a free connection (autocommit: ``work`` begins and ends
        any transaction itself); its result, or None if no connection is free here. Without
        ``ping``, a connection idle for long is not pinged first (a read whose caller reads
        again elsewhere when its connection turns out dead: one round trip saved each time).

        Errors as the engine's path raises them: a failed connection (``OperationalError``,
        ``InterfaceError``) is ``StoreUnavailable``; any other driver error (a unique
        violation, a bug) is SQLAlchemy's ``DBAPIError`` subclass for it.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that made them
            for stale, _ in self._idle:
                stale.pgconn.finish()  # closed without that loop (close() is a coroutine)
            self._idle.clear()
            self._busy, self._loop = 0, loop
        if self._busy >= self._size:
            return None
        self._busy += 1
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            conn = await self._take(ping)
            return await work(conn)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise StoreUnavailable(f"database unavailable: {exc}") from exc
        except psycopg.Error as exc:
            if conn is not None and conn.broken:
                raise StoreUnavailable(f"database connection lost: {exc}") from exc
            raise sa.exc.DBAPIError.instance(None, None, exc, psycopg.Error) from exc
        finally:
            self._busy -= 1
            if conn is not None:
                await self._put_back(conn)

    async def _put_back(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Keep ``conn`` if it is idle and sound; a statement cancelled or failed mid-way
        leaves it in a state not worth repairing: closed."""
        if not conn.broken and conn.info.transaction_status == TransactionStatus.IDLE:
            self._idle.append((conn, time.monotonic()))
        else:
            await _close(conn)

    async def _take(self, ping: bool) -> psycopg.AsyncConnection[Any]:
        while self._idle:
            conn, since = self._idle.pop()
            if not ping or time.monotonic() - since < engines.PG_PING_IDLE:
                return conn
            try:
                await conn.execute("SELECT 1")
                return conn
            except psycopg.Error:
                await _close(conn)
        return await _Connection.connect(
            self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        )

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            await _close(conn)


class _Connection(psycopg.AsyncConnection[Any]):
    """An autocommit connection that keeps its socket's reader registered between waits.

    psycopg's ``wait_async`` adds a reader to the event loop and removes it again for every
    wait (two ``epoll_ctl`` calls, a handle, a timer for its interrupt check): a quarter of
    the statement's Python in a profile of the single enqueue. Here a wait for reading, the
    only kind a request and its reply need, leaves the reader in place; one that fires while
    nobody waits (the server closed, or spoke unasked) removes it, and the next wait adds it
    again. Waits with a timeout, or for writing, are psycopg's own. After any error the
    reader is removed, before psycopg's handling of it may close the socket.
    """

    _fd = -1  # the socket the reader is registered for, or -1
    _waiter: asyncio.Future[None] | None = None

    async def wait(
        self, gen: PQGen[T], interval: float = _INTERVAL, timeout: float | None = None
    ) -> T:
        if timeout is not None:
            return await super().wait(gen, interval, timeout)
        try:
            state = next(gen)
            while state == WAIT_R:
                await self._readable()
                state = gen.send(READY_R)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except BaseException:
            self._unregister()
            raise
        self._unregister()  # a wait for writing: psycopg's, from where the generator is
        return await super().wait(_resumed(state, gen), interval)

    async def _readable(self) -> None:
        loop = asyncio.get_running_loop()
        if self._fd < 0:
            self._fd = self.pgconn.socket
            loop.add_reader(self._fd, self._on_readable)
        self._waiter = waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _on_readable(self) -> None:
        waiter = self._waiter
        if waiter is None:
            self._unregister()  # nobody reads: a readable socket would wake the loop again
        elif not waiter.done():
            waiter.set_result(None)

    def _unregister(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(Exception):  # its loop may be closed (a test's)
                asyncio.get_running_loop().remove_reader(self._fd)
            self._fd = -1

    async def close(self) -> None:
        self._unregister()
        await super().close()


def _resumed(state: Wait, gen: PQGen[T]) -> PQGen[T]:
    """``gen``, already started and waiting for ``state``, as a generator from its start."""
    ready = yield state
    while True:
        try:
            state = gen.send(ready)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        ready = yield state


async def _close(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
