"""Alembic environment, driven in code by ``tickwork.store.migrate`` (no alembic.ini).

The caller passes an open connection in
``config.attributes["connection"]``; migrations run inside its transaction.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from tickwork.store.schema import metadata

connection: Connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
