"""The publish path's own Redis connection: commands written as RESP on an asyncio protocol.

Every enqueue through the API publishes its task runs once they are committed: an ``XADD``
per task run (and now and then the queue set's ``SADD``). Through redis-py's pipeline that
cost ~150 µs of CPU per publish on the 2-core bench machine (its command objects, the
connection pool's checkout, the retry wrapper, the reply parser per command, the pipeline's
reset), a fifth of the single enqueue's API CPU; the same ``XADD`` written here costs ~30 µs.
Replies come back in the order commands were written, so concurrent publishes share the one
connection (pipelined), each waiting for its own replies.

Only plain TCP URLs (``redis://``) are served (``RawPublisher.of`` returns None for TLS or a
unix socket, and the broker keeps redis-py's pipeline); errors are redis-py's own, so the
broker handles them as before: ``ConnectionError`` / ``TimeoutError`` (unreachable: logged,
the scheduler re-sends) and ``ResponseError`` (a command Redis refused, raised after every
reply of the call was read, so the connection stays in step). A connection found broken on
use is replaced once (a server restart leaves the kept one dead); a repeated ``XADD`` can
only add a duplicate message, which the worker's conditional claim drops.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import Connection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tickwork.broker.redis_keys import RedisKeys, encode, lane_of
from tickwork.ports import Delivery

CONNECT_TIMEOUT_S = 2.0
#: ``RawPublisher.send``: past this many calls unanswered on the connection, a call waits.
MAX_AHEAD = 1000
#: ``RawPublisher.close``: how long it waits for the replies of calls ``send`` wrote.
CLOSE_WAIT_S = 1.0
REPLY_TIMEOUT_S = 5.0  # as the broker's redis-py client (``redis_keys.connect``)
Command = Sequence[str | bytes]


def pack(commands: Sequence[Command]) -> bytes:
    """``commands`` as RESP arrays of bulk strings, one after another."""
    out: list[bytes] = []
    for args in commands:
        out.append(b"*%d\r\n" % len(args))
        for arg in args:
            data = arg.encode() if isinstance(arg, str) else arg
            out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


def _first_error(future: asyncio.Future[list[Any]]) -> Exception | None:
    """The error of a call whose replies ``future`` holds: its own, or the first reply's."""
    exc = future.exception()
    if exc is not None:
        return exc if isinstance(exc, Exception) else RedisConnectionError(repr(exc))
    return next((r for r in future.result() if isinstance(r, ResponseError)), None)


async def _reported(call: Awaitable[Any], done: Callable[[Exception | None], None]) -> None:
    """Await ``call``, then hand ``done`` its error, or None."""
    try:
        await call
    except Exception as exc:
        done(exc)
    else:
        done(None)


class _Incomplete(Exception):
    pass


def _reply(buf: bytearray, pos: int) -> tuple[Any, int]:
    """The reply at ``pos`` and where the next starts; ``_Incomplete`` if it has not all
    arrived. Only the kinds the commands sent here answer with: no arrays."""
    eol = buf.find(b"\r\n", pos)
    if eol < 0:
        raise _Incomplete
    kind, line = buf[pos], bytes(buf[pos + 1 : eol])
    if kind == ord("+"):
        return line, eol + 2
    if kind == ord("-"):
        return ResponseError(line.decode(errors="replace")), eol + 2
    if kind == ord(":"):
        return int(line), eol + 2
    if kind == ord("$"):
        size = int(line)
        if size < 0:
            return None, eol + 2
        end = eol + 2 + size
        if len(buf) < end + 2:
            raise _Incomplete
        return bytes(buf[eol + 2 : end]), end + 2
    raise RedisConnectionError(f"unexpected reply from Redis: {bytes(buf[pos:eol])[:40]!r}")


class _Replies(asyncio.Protocol):
    """One connection: hands each reply to the oldest call still waiting for replies."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buf = bytearray()
        self._waiting: deque[tuple[asyncio.Future[list[Any]], int, list[Any]]] = deque()

    @property
    def waiting(self) -> int:
        """How many calls wait for replies."""
        return len(self._waiting)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def request(self, payload: bytes, count: int) -> asyncio.Future[list[Any]]:
        assert self.transport is not None
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._waiting.append((future, count, []))
        self.transport.write(payload)
        return future

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        try:
            while self._waiting:
                value, pos = _reply(buf, pos)
                future, count, replies = self._waiting[0]
                replies.append(value)
                if len(replies) == count:
                    self._waiting.popleft()
                    if not future.done():  # its caller timed out: the connection is closing
                        future.set_result(replies)
        except _Incomplete:
            pass
        except RedisConnectionError as exc:
            self.abort(exc)
        del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.lost.done():
            self.lost.set_result(None)
        self._fail(RedisConnectionError(f"connection to Redis lost: {exc or 'closed'}"))

    def abort(self, exc: Exception) -> None:
        self.closed = True
        self._fail(exc)
        if self.transport is not None:
            with contextlib.suppress(Exception):  # its loop may be gone (a test's, closed)
                self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        waiting, self._waiting = self._waiting, deque()
        for future, _, _ in waiting:
            if not future.done():
                future.set_exception(exc)


class RawPublisher:
    """Sends commands on one connection of its own, made on first use (see the module)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        name: str,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self._address = (host, port)
        hello: list[Command] = []
        if password is not None:
            hello.append(("AUTH", username, password) if username else ("AUTH", password))
        if db:
            hello.append(("SELECT", str(db)))
        hello.append(("CLIENT", "SETNAME", name))
        self._hello = hello
        self._conn: _Replies | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def of(cls, url: str, name: str) -> RawPublisher | None:
        """A publisher for ``url``, or None if it is not a plain TCP ``redis://`` URL."""
        options = parse_url(url)
        if options.get("connection_class", Connection) is not Connection or "host" not in options:
            return None
        return cls(
            options["host"], int(options.get("port", 6379)), name=name,
            db=int(options.get("db", 0)), username=options.get("username"),
            password=options.get("password"),
        )  # fmt: skip

    async def execute(self, commands: Sequence[Command]) -> list[Any]:
        """Send ``commands`` and return their replies; raise the first ``ResponseError``
        among them once all arrived."""
        payload = pack(commands)
        conn, reused = await self._connection()
        while True:
            try:
                replies = await self._wait(conn, conn.request(payload, len(commands)))
                break
            except RedisConnectionError:
                if not reused:
                    raise
                self._drop(conn)  # the kept connection was dead: once more on a new one
                conn, _ = await self._connection()
                reused = False
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    async def send(
        self, commands: Sequence[Command], done: Callable[[Exception | None], None]
    ) -> None:
        """Write ``commands`` and return without waiting for their replies (only to connect,
        when no connection is open; or, past ``MAX_AHEAD`` calls unanswered, for the
        replies, as ``execute`` does); ``done`` gets the first error among the replies, or
        None, once they arrived. Raises only what connecting raises."""
        conn, _ = await self._connection()
        if conn.waiting >= MAX_AHEAD:  # Redis is slow to answer: wait, with the timeout
            await _reported(self.execute(commands), done)
            return
        conn.request(payload=pack(commands), count=len(commands)).add_done_callback(
            lambda future: done(_first_error(future))
        )

    async def _connection(self) -> tuple[_Replies, bool]:
        """The open connection, and whether it was open before this call."""
        conn, loop = self._conn, asyncio.get_running_loop()
        if conn is not None and not conn.closed and self._loop is loop:
            return conn, True
        if self._loop is not loop:  # a new event loop (tests): the old one's are gone
            self._drop(conn)
            self._loop, self._lock = loop, asyncio.Lock()
        async with self._lock:  # concurrent first calls make one connection
            conn = self._conn
            if conn is not None and not conn.closed:
                return conn, True
            self._conn = await self._connect()
            return self._conn, False

    async def _wait(self, conn: _Replies, future: asyncio.Future[list[Any]]) -> list[Any]:
        try:
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                return await future
        except TimeoutError:
            conn.abort(RedisTimeoutError("Redis did not answer in time"))  # out of step
            raise RedisTimeoutError(f"no reply from Redis in {REPLY_TIMEOUT_S} s") from None

    async def _connect(self) -> _Replies:
        loop = asyncio.get_running_loop()
        conn: _Replies | None = None
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                _, conn = await loop.create_connection(_Replies, *self._address)
                hello = await conn.request(pack(self._hello), len(self._hello))
            refused = [r for r in hello if isinstance(r, ResponseError)]
            if refused:
                raise RedisConnectionError(f"Redis refused the connection: {refused[0]}")
        except BaseException as exc:
            if conn is not None:
                conn.abort(RedisConnectionError("not connected"))
            if isinstance(exc, (OSError, TimeoutError)):
                raise RedisConnectionError(f"cannot connect to Redis: {exc}") from exc
            raise
        return conn

    def _drop(self, conn: _Replies | None) -> None:
        if conn is not None and conn is self._conn:
            self._conn = None
        if conn is not None and not conn.closed:
            conn.abort(RedisConnectionError("connection closed"))

    async def close(self) -> None:
        """Close the connection, once the replies to calls ``send`` wrote have come (a
        ``PING`` 's reply comes after theirs; ``CLOSE_WAIT_S`` at most)."""
        conn = self._conn
        if conn is not None and conn.waiting and self._loop is asyncio.get_running_loop():
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_WAIT_S):
                    await conn.request(pack([("PING",)]), 1)
        self._drop(conn)
        if conn is not None and self._loop is asyncio.get_running_loop():
            await conn.lost  # the socket is closed on the loop's next turn


#: The queue set (``RedisKeys.queues``, which only ``depths`` reads) is added to again after
#: this many seconds, so that a flushed Redis has it back soon; in between, a publish is its
#: ``XADD`` s alone (one command per task run instead of two).
QUEUE_SET_EVERY_S = 10.0


class ReadyPublisher:
    """``RedisStreamsBroker.publish``: an ``XADD`` per delivery to its queue's lane, and the
    queue set's ``SADD`` of the queues not added lately; over a ``RawPublisher`` when the URL
    allows one, else over ``client`` 's pipeline."""

    def __init__(self, url: str, name: str, client: aioredis.Redis, keys: RedisKeys) -> None:
        self._raw = RawPublisher.of(url, name)
        self._client, self._keys = client, keys
        self._added: dict[str, float] = {}  # queue -> when its SADD is due again (monotonic)

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        """Raise what the connection raises (``UNREACHABLE``, ``ResponseError``)."""
        commands, queues, now = self._commands(deliveries)
        if self._raw is not None:
            await self._raw.execute(commands)
        else:
            pipe = self._client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            await pipe.execute()
        self._note_added(queues, now)

    async def send_ahead(
        self, deliveries: Sequence[Delivery], done: Callable[[Exception | None], None]
    ) -> None:
        """``publish``, returning once the commands are written (``RawPublisher.send``);
        ``done`` gets the outcome. Without a ``RawPublisher``, ``publish`` itself. Raises
        nothing: connecting's errors go to ``done`` too."""
        if self._raw is None:
            await _reported(self.publish(deliveries), done)
            return
        commands, queues, now = self._commands(deliveries)
        try:
            await self._raw.send(commands, done)
        except Exception as exc:
            done(exc)
            return
        self._note_added(queues, now)

    def _commands(self, deliveries: Sequence[Delivery]) -> tuple[list[Command], list[str], float]:
        """The commands of a publish, the queues whose ``SADD`` they carry, and now."""
        now = time.monotonic()
        stream, added = self._keys.stream, self._added
        commands: list[Command] = [
            ("XADD", stream(d.queue, lane_of(d.priority)), "*", "m", encode(d)) for d in deliveries
        ]
        queues = sorted({d.queue for d in deliveries if added.get(d.queue, 0.0) <= now})
        if queues:
            commands.append(("SADD", self._keys.queues(), *queues))
        return commands, queues, now

    def _note_added(self, queues: list[str], now: float) -> None:
        for queue in queues:
            self._added[queue] = now + QUEUE_SET_EVERY_S

    async def close(self) -> None:
        if self._raw is not None:
            await self._raw.close()
