"""Worker registry (``tickwork status``).

Revision ID: r0006
Revises: r0004
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0006"
down_revision: str | None = "r0004"
branch_labels: str | None = None
depends_on: str | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("queues", sa.JSON, nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("heartbeat_at", TS, nullable=False),
        sa.Column("running", sa.Integer, nullable=False),
        sa.Column("stopped_at", TS),
    )


def downgrade() -> None:
    op.drop_table("workers")
