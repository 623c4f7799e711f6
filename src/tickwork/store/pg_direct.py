"""One-statement writes on the event loop, for the hot single-enqueue path on PostgreSQL.

A store operation normally runs as a transaction on a worker thread (``engine``): a thread
hop each way plus SQLAlchemy's connection and transaction bookkeeping, about 110 µs of CPU
for a one-statement write, against 35 µs for the same statement on an asyncio psycopg
connection in autocommit mode (one round trip, no ``BEGIN``/``COMMIT``: a single statement
is atomic by itself). ``DirectWriter`` keeps a few such connections for writes that are one
statement; when all are busy, or on another event loop than theirs, it says so (``None``)
and the caller takes the usual path.

Failures are the store's: a connection that fails is dropped and the write raises
``StoreUnavailable`` (it did not commit, or the caller cannot know: the same as a
transaction whose connection fails); a unique or foreign-key violation raises SQLAlchemy's
``IntegrityError``, which the store maps like any other. A connection idle over
``PG_PING_IDLE`` seconds is pinged before use, as the engine's are.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import URL

from tickwork.core.errors import StoreUnavailable
from tickwork.store import engine as engines

#: Connections kept per store (the API's single writes rarely overlap more than this).
DIRECT_CONNECTIONS = 4
CONNECT_TIMEOUT_S = 5


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
            conn = await self._take()
            rowcount = (await conn.execute(sql, params)).rowcount
            self._idle.append((conn, time.monotonic()))
            conn = None  # back in the pool
            return rowcount
        except psycopg.IntegrityError as exc:
            raise sa.exc.DBAPIError.instance(sql, None, exc, psycopg.Error) from exc
        except psycopg.Error as exc:
            raise StoreUnavailable(f"database unavailable: {exc}") from exc
        finally:
            self._busy -= 1
            if conn is not None:  # failed or cancelled mid-statement: its state is unknown
                await _close(conn)

    async def _take(self) -> psycopg.AsyncConnection[Any]:
        while self._idle:
            conn, since = self._idle.pop()
            if time.monotonic() - since < engines.PG_PING_IDLE:
                return conn
            try:
                await conn.execute("SELECT 1")
                return conn
            except psycopg.Error:
                await _close(conn)
        return await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        )

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            await _close(conn)


async def _close(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
