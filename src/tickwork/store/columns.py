"""Column types and dialect markers shared by the SQL store's tables (``schema.py``) and
the tables kept beside them (``secrets.py``).

Migrations in ``migrations/`` spell their types out themselves: they must not change when
these do.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect

ID = sa.String(64)
NAME = sa.String(200)
STATE = sa.String(20)


class _SqliteText(sqlite.DATETIME):
    """SQLite's DATETIME column type, with SQLAlchemy's slower conversions switched off."""

    def bind_processor(self, dialect: Dialect) -> None:
        return None

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        return None


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Stores UTC; always returns aware UTC datetimes on every backend.

    PostgreSQL keeps a ``timestamptz``. SQLite keeps fixed-width text
    (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC), so comparing strings orders instants correctly
    and equality is exact. The conversion is done here, in C-backed calls, because the hot
    paths move thousands of timestamps per batch.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(_SqliteText())  # type: ignore[no-untyped-call]
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            # A naive datetime is a bug upstream: refuse it rather than guess its zone.
            raise ValueError(f"naive datetime {value.isoformat()} given; use aware UTC")
        utc = value if value.tzinfo is UTC else value.astimezone(UTC)
        if dialect.name == "sqlite":
            return utc.isoformat(" ", "microseconds")[:26]  # drop the "+00:00"
        return utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return datetime.fromisoformat(value).replace(tzinfo=UTC)
        stamp: datetime = value
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


def ts(name: str, **kw: Any) -> sa.Column[datetime]:
    """A timestamp column: aware UTC on every backend."""
    return sa.Column(name, UTCDateTime(), **kw)


#: ``info`` of a table, constraint or index that exists on one backend only (see ``on_dialect``).
PG_ONLY = {"dialect": "postgresql"}
SQLITE_ONLY = {"dialect": "sqlite"}


def on_dialect(item: sa.schema.SchemaItem, dialect: str) -> bool:
    """Whether ``item`` of this metadata exists in a database of ``dialect``."""
    only = item.info.get("dialect")
    return only is None or only == dialect
