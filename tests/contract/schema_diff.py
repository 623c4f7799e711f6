"""The difference between a migrated database and ``store.schema.metadata``, the way the
schema tests read it: objects of the other backend only (``schema.on_dialect``) and
PostgreSQL's partitions (made by the migration and ``maintain_partitions``) left out."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection

from tickwork.store.schema import metadata, on_dialect


def schema_diff(conn: Connection) -> list[Any]:
    dialect = conn.dialect.name

    def include(item: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
        # Objects of the other backend only (``schema.on_dialect``), and PostgreSQL's
        # partitions, which the migration and ``maintain_partitions`` make.
        if not reflected:
            return on_dialect(item, dialect)
        return not (kind == "table" and name is not None and name not in metadata.tables)

    opts = {"compare_type": True, "include_object": include}
    context = MigrationContext.configure(conn, opts=opts)
    diff: list[Any] = compare_metadata(context, metadata)
    return diff
