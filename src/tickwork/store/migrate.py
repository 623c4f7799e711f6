"""Schema migrations: Alembic ``upgrade`` run in code (no alembic.ini)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

from tickwork.core.errors import TickworkError

MIGRATIONS = Path(__file__).parent / "migrations"
#: Serializes concurrent ``migrate()`` calls (several schedulers starting) on PostgreSQL.
_PG_MIGRATION_LOCK = 0x7469636B  # "tick"


class MigrationError(TickworkError):
    """An upgrade would have left rows that break a constraint; nothing was committed (the
    CLI prints it as one line)."""


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def script_directory() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str | None:
    return script_directory().get_current_head()


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database behind ``engine`` to ``revision`` (the newest by default) in one
    transaction; a no-op when it is there. (The store runs its dialect's upgrade; this is
    for tools and tests holding an engine.)"""
    sqlite = engine.dialect.name == "sqlite"
    (upgrade_sqlite if sqlite else upgrade_postgresql)(engine, revision)


def upgrade_postgresql(engine: Engine, revision: str) -> None:
    """Several schedulers may start at once: they take turns on an advisory lock."""
    with engine.begin() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
        command.upgrade(alembic_config(conn), revision)


def upgrade_sqlite(engine: Engine, revision: str) -> None:
    with engine.connect() as conn:
        _upgrade_sqlite(conn, revision)


def _upgrade_sqlite(conn: Connection, revision: str) -> None:
    """SQLite changes a table in batch mode: copy it, drop the old one, rename the copy.
    With foreign keys enforced, dropping a table that other tables' rows refer to fails
    (or deletes them), so enforcement is off during the upgrade, as Alembic's batch-mode
    documentation prescribes. The pragma is a no-op inside a transaction, so it is set
    before ours begins; every reference is checked before the commit instead."""
    driver = conn.connection.dbapi_connection
    assert driver is not None
    driver.execute("PRAGMA foreign_keys=OFF")
    try:
        with conn.begin():
            command.upgrade(alembic_config(conn), revision)
            broken = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
            if broken:
                table, rowid, parent, _ = broken[0]
                raise MigrationError(
                    f"upgrade to {revision} left {len(broken)} row(s) with a dangling "
                    f"reference (e.g. {table} rowid {rowid} -> {parent}); rolled back"
                )
    finally:
        driver.execute("PRAGMA foreign_keys=ON")
