"""The SQL store: SQLite and PostgreSQL behind the ``Store`` port."""

from tickwork.store.sql import SqlStore, open_store

__all__ = ["SqlStore", "open_store"]
