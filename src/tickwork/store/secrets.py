"""Queries of the ``SecretStore`` port (``SqlStore`` delegates): encrypted secrets by name.

The table is defined here, on the shared metadata, so that the schema module stays as the
``store`` reshaping left it; the migration ``secrets`` creates it.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from tickwork.ports.secrets import StoredSecret
from tickwork.store.columns import UTCDateTime
from tickwork.store.schema import metadata

secrets = sa.Table(
    "secrets",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("ciphertext", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
)


def put_secret(conn: Connection, name: str, ciphertext: str, now: datetime) -> bool:
    """Create or replace ``name``; True if it was created."""
    changed = conn.execute(
        sa.update(secrets)
        .where(secrets.c.name == name)
        .values(ciphertext=ciphertext, updated_at=now)
    ).rowcount
    if changed:
        return False
    conn.execute(
        secrets.insert().values(name=name, ciphertext=ciphertext, created_at=now, updated_at=now)
    )
    return True


def get_secrets(conn: Connection, names: Collection[str]) -> dict[str, StoredSecret]:
    wanted = sorted(set(names))
    if not wanted:
        return {}
    query = sa.select(secrets).where(secrets.c.name.in_(wanted))
    return {row["name"]: _secret(row) for row in conn.execute(query).mappings()}


def list_secrets(conn: Connection) -> list[StoredSecret]:
    query = sa.select(secrets).order_by(secrets.c.name)
    return [_secret(row) for row in conn.execute(query).mappings()]


def delete_secret(conn: Connection, name: str) -> bool:
    return conn.execute(sa.delete(secrets).where(secrets.c.name == name)).rowcount > 0


def _secret(row: RowMapping) -> StoredSecret:
    return StoredSecret(row["name"], row["ciphertext"], row["created_at"], row["updated_at"])
