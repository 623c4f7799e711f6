"""Database URLs and engine setup for SQLite (aiosqlite) and PostgreSQL (psycopg 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from tickwork.core.errors import ValidationError

SQLITE = "sqlite+aiosqlite"
POSTGRES = "postgresql+psycopg"
_DRIVERS = {
    "sqlite": SQLITE,
    SQLITE: SQLITE,
    "postgres": POSTGRES,
    "postgresql": POSTGRES,
    POSTGRES: POSTGRES,
}
_ACCEPTED = "a sqlite:///path.db, sqlite://, postgresql://… or postgresql+psycopg://… URL"
#: Milliseconds a SQLite connection waits for another process's write lock before failing.
SQLITE_BUSY_TIMEOUT_MS = 10_000


def normalize_url(url: str) -> URL:
    """Parse ``url`` and select the async driver tickwork uses for its backend."""
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


@dataclass(frozen=True, slots=True)
class Engines:
    """A read engine and a write engine; the same object where the backend allows parallel writes.

    SQLite has one writer per database. The write engine holds a single connection, so writers in
    this process queue on the pool rather than spinning in ``busy_timeout``, and each write
    transaction starts with ``BEGIN IMMEDIATE`` so a read-then-write cannot be overtaken by
    another process.
    """

    read: AsyncEngine
    write: AsyncEngine
    #: True when every operation must be serialized (one shared in-memory connection).
    single_connection: bool

    @property
    def dialect(self) -> str:
        return self.write.dialect.name

    async def dispose(self) -> None:
        await self.write.dispose()
        if self.read is not self.write:
            await self.read.dispose()


def create_engines(url: str) -> Engines:
    """Engines for ``url`` (see :func:`normalize_url`), configured for tickwork's workload."""
    parsed = normalize_url(url)
    if parsed.drivername == POSTGRES:
        engine = create_async_engine(parsed, pool_size=10, max_overflow=10, pool_pre_ping=True)
        return Engines(read=engine, write=engine, single_connection=False)
    if is_memory(parsed):
        memory = _sqlite_engine(parsed, "BEGIN IMMEDIATE", poolclass=StaticPool)
        return Engines(read=memory, write=memory, single_connection=True)
    write = _sqlite_engine(parsed, "BEGIN IMMEDIATE", pool_size=1, max_overflow=0)
    read = _sqlite_engine(parsed, "BEGIN", pool_size=5, max_overflow=5)
    return Engines(read=read, write=write, single_connection=False)


def _sqlite_engine(url: URL, begin: str, **kw: Any) -> AsyncEngine:
    engine = create_async_engine(url, **kw)

    @event.listens_for(engine.sync_engine, "connect")
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

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(begin)

    return engine
