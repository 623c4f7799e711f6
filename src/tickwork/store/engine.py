"""Database URLs, engines and the threads that run transactions, for SQLite and PostgreSQL.

The store's queries are plain synchronous SQLAlchemy Core. Each store operation runs as one
transaction on a worker thread, so the event loop pays one thread hop per transaction instead
of one per statement (an asyncio driver such as aiosqlite hops per statement: about 0.2 ms
each here, against 16 µs for a whole small SQLite transaction).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from psycopg.conninfo import make_conninfo
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, create_engine, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection, StaticPool

from tickwork.core.errors import ValidationError

T = TypeVar("T")

SQLITE = "sqlite+pysqlite"
POSTGRES = "postgresql+psycopg"
_DRIVERS = {
    "sqlite": SQLITE,
    SQLITE: SQLITE,
    "sqlite+aiosqlite": SQLITE,  # accepted for compatibility with async-style URLs
    "postgres": POSTGRES,
    "postgresql": POSTGRES,
    POSTGRES: POSTGRES,
}
_ACCEPTED = "a sqlite:///path.db, sqlite://, postgresql://… or postgresql+psycopg://… URL"
#: Milliseconds a SQLite connection waits for another process's write lock before failing.
SQLITE_BUSY_TIMEOUT_MS = 10_000


def normalize_url(url: str) -> URL:
    """Parse ``url`` and select the driver tickwork uses for its backend."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValidationError("url", f"is not a database URL; use {_ACCEPTED}") from None
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise ValidationError("url", f"{parsed.drivername!r} is not supported; use {_ACCEPTED}")
    return parsed.set(drivername=driver)


def is_memory(url: URL) -> bool:
    return url.drivername == SQLITE and url.database in (None, "", ":memory:")


PG_POOL_SIZE = 10
#: A pooled PostgreSQL connection unused this long is pinged before it is handed out.
PG_PING_IDLE = 1.0
SQLITE_READERS = 4


class WriterBusy(Exception):
    """The writer connection is in a transaction on another thread (``HeldConnection.run_now``)."""


class HeldConnection:
    """The SQLite writer thread's one connection, kept checked out between transactions.

    ``engine.begin()`` checks a connection out of the pool and back in around every
    transaction: about 12 of the 30 µs of CPU a small write transaction costs here (BEGIN
    IMMEDIATE, one INSERT, COMMIT: 29-31 µs through ``engine.begin()``, 17-19 µs on a kept
    connection). The writer is one thread over a pool of one, so nothing else wants the
    connection meanwhile. It is used on the writer thread, and by ``run_now`` on the caller's
    thread while the writer thread is idle (one transaction at a time, under ``_busy``); one
    that SQLAlchemy invalidated (the file went away) is replaced, and ``close`` gives it back
    before the engine is disposed or the schema migrated. A ``run_now`` that finds another
    process holding the file's write lock waits for it on the caller's thread (up to
    ``SQLITE_BUSY_TIMEOUT_MS``): in `tickwork up` the data dir's lock leaves no other writer.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._busy = threading.Lock()  # held for each transaction, on whichever thread
        self._ended = 0.0  # when the last transaction ended (time.monotonic)

    def run(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one transaction on the kept connection."""
        with self._busy:
            return self._transaction(work)

    def run_now(self, work: Callable[[Connection], T], quiet: float = 0.0) -> T:
        """``run`` on this thread if no transaction is in progress and none ended in the last
        ``quiet`` seconds, else ``WriterBusy``."""
        if time.monotonic() - self._ended < quiet or not self._busy.acquire(blocking=False):
            raise WriterBusy
        try:
            return self._transaction(work)
        finally:
            self._busy.release()

    def _transaction(self, work: Callable[[Connection], T]) -> T:
        conn = self._conn
        if conn is None or conn.invalidated or conn.closed:
            self._close()
            conn = self._conn = self._engine.connect()
        try:
            with conn.begin():
                return work(conn)
        finally:
            self._ended = time.monotonic()

    def close(self) -> None:
        with self._busy:
            self._close()

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """The connection given back to the engine's pool for the block (a schema upgrade
        takes the pool's one connection); no transaction runs here meanwhile."""
        with self._busy:
            self._close()
            yield

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass(frozen=True, slots=True)
class Engines:
    """Engines plus the threads their transactions run on.

    SQLite has one writer per database: writes go through one connection on one thread, so
    writers in this process queue in order instead of spinning in ``busy_timeout``, and each
    write transaction starts with ``BEGIN IMMEDIATE`` so a read-then-write cannot be
    overtaken by another process. Reads use their own connections and threads (WAL lets
    them run beside the writer). PostgreSQL uses one pool and as many threads as connections;
    its reads and single-statement writes (``alone``) run in autocommit on that pool: under
    READ COMMITTED each statement takes its own snapshot anyway, so a BEGIN and a COMMIT
    around them only cost two more round trips (and PostgreSQL wake-ups).
    """

    read: Engine
    write: Engine
    readers: ThreadPoolExecutor
    writers: ThreadPoolExecutor
    alone: Engine  # one statement, its own transaction (PostgreSQL: autocommit)
    #: The SQLite file's writer connection, kept between transactions (None: PostgreSQL,
    #: and SQLite in memory, whose one connection serves the reads too).
    held: HeldConnection | None = None

    @property
    def dialect(self) -> str:
        return self.write.dialect.name

    @contextlib.contextmanager
    def writer_released(self) -> Iterator[None]:
        """The kept writer connection given back to its pool for the block."""
        if self.held is None:
            yield
            return
        with self.held.released():
            yield

    def dispose(self) -> None:
        # Threads first: a transaction still running (its caller was cancelled) returns its
        # connection when it ends, and a pool disposed before that would never close it.
        if self.held is not None:
            with contextlib.suppress(RuntimeError):  # disposed before: its thread is gone
                self.writers.submit(self.held.close).result()
        self.writers.shutdown(wait=True)
        if self.readers is not self.writers:
            self.readers.shutdown(wait=True)
        self.write.dispose()
        if self.read.pool is not self.write.pool:
            self.read.dispose()


def create_engines(url: str) -> Engines:
    """Engines for ``url`` (see :func:`normalize_url`), configured for tickwork's workload."""
    parsed = normalize_url(url)
    if parsed.drivername == POSTGRES:
        parsed = named(without_jit(parsed))
        # LIFO: at low load the few connections in use stay warm and skip the idle ping.
        engine = create_engine(parsed, pool_size=PG_POOL_SIZE, max_overflow=0, pool_use_lifo=True)
        _ping_when_idle(engine)
        threads = ThreadPoolExecutor(PG_POOL_SIZE, thread_name_prefix="tickwork-pg")
        auto = engine.execution_options(isolation_level="AUTOCOMMIT")
        return Engines(read=auto, write=engine, readers=threads, writers=threads, alone=auto)
    writers = ThreadPoolExecutor(1, thread_name_prefix="tickwork-sqlite-write")
    if is_memory(parsed):
        # One shared connection: every operation, read or write, takes its turn on one thread.
        memory = _sqlite_engine(parsed, "BEGIN IMMEDIATE", poolclass=StaticPool)
        return Engines(read=memory, write=memory, readers=writers, writers=writers, alone=memory)
    write = _sqlite_engine(parsed, "BEGIN IMMEDIATE", pool_size=1, max_overflow=0)
    read = _sqlite_engine(parsed, "BEGIN", pool_size=SQLITE_READERS, max_overflow=0)
    readers = ThreadPoolExecutor(SQLITE_READERS, thread_name_prefix="tickwork-sqlite-read")
    return Engines(
        read=read, write=write, readers=readers, writers=writers, alone=write,
        held=HeldConnection(write),
    )  # fmt: skip


#: Sent with every PostgreSQL connection (libpq ``options``): tickwork's statements are short,
#: index-bound lookups, and a plan whose estimate crosses ``jit_above_cost`` (a LIMIT 1 over a
#: large partial index can) was JIT-compiled on every call: 2 s, of which 2 s compiling.
PG_OPTIONS = "-c jit=off"


#: ``application_name`` of this process's PostgreSQL sessions (``pg_stat_activity`` shows
#: which process kind holds a connection): ``tickwork-<kind>`` once the process says its kind.
_application_name = "tickwork"


def name_sessions(kind: str) -> None:
    """Name the PostgreSQL sessions this process opens from now on ``tickwork-<kind>``."""
    global _application_name
    _application_name = f"tickwork-{kind}"


def named(url: URL) -> URL:
    """``url`` with this process's ``application_name``, unless the URL gives its own or
    the environment does (libpq's ``PGAPPNAME``)."""
    if "application_name" in url.query or os.environ.get("PGAPPNAME"):
        return url
    return url.update_query_dict({"application_name": _application_name})


def without_jit(url: URL) -> URL:
    """``url`` with JIT off for its sessions, after any ``options`` the URL already has."""
    given = url.query.get("options")
    given = given if isinstance(given, str) else " ".join(given or ())
    return url.update_query_dict({"options": f"{given} {PG_OPTIONS}".strip()})


def libpq_conninfo(url: URL) -> str:
    """``url`` as a libpq ``key=value`` string, for psycopg connections made without the engine.

    Not the URL rendered as a URI: that writes the space in ``options`` (``-c jit=off``) as
    ``+``, which libpq does not read back as a space, and the server then refuses the
    connection ("unrecognized configuration parameter "+jit"").
    """
    query = {k: v if isinstance(v, str) else " ".join(v) for k, v in url.query.items()}
    return make_conninfo(
        host=url.host,
        port=url.port,
        user=url.username,
        password=url.password,
        dbname=url.database,
        **query,
    )


def _ping_when_idle(engine: Engine) -> None:
    """Ping a connection on checkout only if it sat in the pool over PG_PING_IDLE seconds.

    ``pool_pre_ping`` pings on every checkout: one more round trip per transaction, for
    connections that were in use a few milliseconds ago. A connection idle that long (the
    server may have restarted, a proxy may have dropped it) is pinged, and a dead one is
    replaced before the transaction starts. A connection whose server went away while it
    was in steady use fails its next transaction instead (``StoreUnavailable``, a 503 in the
    API), and SQLAlchemy then replaces every connection of the pool.
    """

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi: Any, record: ConnectionPoolEntry) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(
        dbapi: Any, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection
    ) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < PG_PING_IDLE:
            return
        try:
            engine.dialect.do_ping(dbapi)
        except Exception as exc:  # the driver's error: this connection is gone
            raise DisconnectionError(f"ping failed: {exc}") from exc
        finally:
            record.info.pop("idle_since", None)


def _sqlite_engine(url: URL, begin: str, **kw: Any) -> Engine:
    # Connections move between the threads of one executor, never used by two at once.
    # Every use is one `engine.begin()` block that commits or rolls back itself, so the
    # pool's rollback-on-return would only add a statement to every transaction.
    engine = create_engine(
        url, connect_args={"check_same_thread": False}, pool_reset_on_return=None, **kw
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy (not the driver) decide when transactions begin: see _on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in (
            "journal_mode=WAL",
            f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
            "foreign_keys=ON",
            "synchronous=NORMAL",
        ):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # On the driver's connection: through ``exec_driver_sql`` the BEGIN alone cost a
        # statement's whole SQLAlchemy execution (context, cursor, result) per transaction.
        conn.connection.driver_connection.execute(begin)  # type: ignore[union-attr]

    return engine
