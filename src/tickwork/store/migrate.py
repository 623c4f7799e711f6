"""Schema migrations: Alembic ``upgrade head`` run in code (no alembic.ini)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

MIGRATIONS = Path(__file__).parent / "migrations"
#: Serializes concurrent ``migrate()`` calls (several schedulers starting) on PostgreSQL.
_PG_MIGRATION_LOCK = 0x7469636B  # "tick"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _upgrade(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
    command.upgrade(alembic_config(connection), "head")


def upgrade_head(engine: Engine) -> None:
    """Bring the database behind ``engine`` to the newest revision; a no-op when it is there."""
    with engine.begin() as conn:
        upgrade_head_on(conn)


def upgrade_head_on(connection: Connection) -> None:
    """Upgrade inside the caller's open transaction."""
    _upgrade(connection)
