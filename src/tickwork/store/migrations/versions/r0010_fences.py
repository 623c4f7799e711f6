"""Fence rows: the highest token seen per lease, for leases held in etcd or ZooKeeper.

Revision ID: r0010_fences
Revises: r0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0010_fences"
down_revision: str | None = "r0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "fences",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("token", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("fences")
