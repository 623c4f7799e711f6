"""The SQL store: SQLite and PostgreSQL behind the ``Store`` port.

``SqlStore`` and ``open_store`` load ``store/sql.py`` (SQLAlchemy's engine, Alembic, every
query module) on first use, not on ``import tickwork.store``: the transactional outbox
(``tickwork.outbox``) needs only a few modules of this package, and importing it cost a
producer's process ~0.35 s of CPU more when this package loaded the whole store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwork.store.sql import SqlStore, open_store

__all__ = ["SqlStore", "open_store"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tickwork.store import sql

        return getattr(sql, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
