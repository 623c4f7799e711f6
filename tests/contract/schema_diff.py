"""The difference between a migrated database and ``store.schema.metadata``, the way the
schema tests read it: objects of the other backend only (``schema.on_dialect``) and
PostgreSQL's partitions (made by the migration and ``maintain_partitions``) left out."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection

from tickwork.store.columns import on_dialect
from tickwork.store.schema import metadata


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


def insert_as_of(conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` into ``table`` as the database's current revision holds it: columns a
    later migration adds (``jobs.params``, ...) are left out, so rows made by today's row
    functions fit an old schema."""
    present = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
    shape = sa.Table(
        table.name,
        sa.MetaData(),
        *(sa.Column(c.name, c.type) for c in table.c if c.name in present),
    )
    conn.execute(shape.insert(), [{k: v for k, v in r.items() if k in present} for r in rows])
