"""Scheduler HA: the leases table (leader lease with a fencing token).

Revision ID: r0003
Revises: r0002
Create Date: 2026-01-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0003"
down_revision: str | None = "r0002"
branch_labels: str | None = None
depends_on: str | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("acquired_at", TS, nullable=False),
        sa.Column("renewed_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leases")
