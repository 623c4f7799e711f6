"""``AsyncClient``'s wire: ``sdk/http1.py``'s requests and answers on asyncio connections.

Until session 16 ``AsyncClient`` sent through aiohttp. Against a server that answers at once
(``bench/http_floor.py``, 32 calls in flight), a call cost the client ~100 µs of CPU through
aiohttp against ~30 µs on an asyncio protocol that writes the request in one piece and parses
the answer as it arrives.

The pool is aiohttp's connector's: connections kept alive and reused, at most
``max_connections`` at once (more calls wait for a free one, up to ``timeout``), one idle
longer than ``keepalive`` seconds not used again, and one the server closed noticed before a
request is sent on it. A pool belongs to one event loop; a call from another loop opens
another. ``timeout`` bounds the connect and each wait for the answer's next bytes. A
request is never sent twice; a call cancelled or failed mid-request closes its connection.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tickwork.sdk.errors import Unreachable
from tickwork.sdk.http1 import BadAnswer, Origin, parse, readable

if TYPE_CHECKING:
    from tickwork.sdk.calls import Call
    from tickwork.sdk.wires import Reply, Settings


class _Connection(asyncio.Protocol):
    """One connection: the answer to the request it carries, parsed as its bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.sock: Any = None
        self.closed = False  # by the server, or on our side
        self._buf = bytearray()
        self._head_only = False
        self._answer: asyncio.Future[tuple[Reply, bool]] | None = None
        self._deadline: asyncio.Timeout | None = None
        self._timeout = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.sock = transport.get_extra_info("socket")

    def ask(
        self, request: bytes, head_only: bool, deadline: asyncio.Timeout, timeout: float
    ) -> asyncio.Future[tuple[Reply, bool]]:
        """Sends ``request``; the future answer (and whether the connection can be reused).
        Each arrival of bytes moves ``deadline`` to ``timeout`` seconds later."""
        assert self.transport is not None
        self._head_only, self._deadline, self._timeout = head_only, deadline, timeout
        self._answer = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._answer

    def data_received(self, data: bytes) -> None:
        self._buf += data
        answer = self._answer
        if answer is None or answer.done():
            self.close()  # bytes nobody asked for: the connection is not to be trusted
            return
        try:
            got = parse(self._buf, self._head_only, eof=False)
        except BadAnswer as exc:
            answer.set_exception(exc)
            return
        if got is None:
            if self._deadline is not None:
                self._deadline.reschedule(answer.get_loop().time() + self._timeout)
            return
        self._buf.clear()
        self._answer = self._deadline = None
        answer.set_result(got)

    def eof_received(self) -> bool:
        self._ended(None)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)

    def _ended(self, exc: Exception | None) -> None:
        self.closed = True
        answer, self._answer = self._answer, None
        if answer is None or answer.done():
            return
        try:
            got = parse(self._buf, self._head_only, eof=True)  # an answer read to the close
        except BadAnswer as bad:
            answer.set_exception(exc or bad)
            return
        if got is not None:
            answer.set_result(got)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Pool:
    """The connections of one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_connections: int) -> None:
        self.loop = loop
        self.slots = asyncio.Semaphore(max_connections)
        #: Idle connections and when each was last used (loop time); the newest last.
        self.idle: list[tuple[_Connection, float]] = []

    def take(self, keepalive: float) -> _Connection | None:
        now = self.loop.time()
        while self.idle:
            conn, used = self.idle.pop()
            # closed: the loop saw the server close it; readable: it did, and the loop has not
            # run since (or the server wrote what nobody asked for)
            if not conn.closed and now - used < keepalive and not readable(conn.sock):
                return conn
            conn.close()
        return None

    def close(self) -> None:
        idle, self.idle = self.idle, []
        for conn, _ in idle:
            conn.close()


class AsyncHttp1Wire:
    """``AsyncClient``'s wire: a pool of keep-alive HTTP/1.1 connections per event loop."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._origin = Origin(settings)
        self._pool: _Pool | None = None

    def _here(self) -> _Pool:
        loop = asyncio.get_running_loop()
        if self._pool is None or self._pool.loop is not loop:
            self._pool = _Pool(loop, self._settings.max_connections)
        return self._pool

    async def send(self, call: Call[Any]) -> Reply:
        origin, timeout = self._origin, self._settings.timeout
        if origin.unusable is not None:  # as any other URL nothing answers at: on the call
            raise Unreachable(origin.url, origin.unusable)
        request = origin.request(call)
        pool = self._here()
        if not pool.slots.locked():
            await pool.slots.acquire()  # at once: no timer to set
        else:
            try:
                async with asyncio.timeout(timeout):
                    await pool.slots.acquire()
            except TimeoutError:
                raise Unreachable(origin.url, f"no free connection within {timeout:g} s") from None
        conn = pool.take(self._settings.keepalive)
        kept = False
        try:
            if conn is None:
                conn = await self._connect(pool.loop)
            async with asyncio.timeout(timeout) as deadline:
                reply, reusable = await conn.ask(request, call.method == "HEAD", deadline, timeout)
            if reusable and not conn.closed and self._pool is pool:
                pool.idle.append((conn, pool.loop.time()))
                kept = True
            return reply
        except (OSError, BadAnswer, TimeoutError) as exc:
            raise origin.unreachable(exc) from exc
        finally:
            if conn is not None and not kept:
                conn.close()  # failed, cancelled, or not reusable
            pool.slots.release()

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        origin = self._origin
        context = origin.context()
        async with asyncio.timeout(self._settings.timeout):
            _, conn = await loop.create_connection(
                _Connection, origin.host, origin.port, ssl=context,
                server_hostname=origin.host if context is not None else None,
            )  # fmt: skip
        return conn

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None and pool.loop is asyncio.get_running_loop():
            pool.close()
