"""Scheduler replicas in the process registry: ``workers.kind`` (``worker`` | ``scheduler``),
so ``tickwork status`` can list the standbys next to the leader.

Revision ID: r0012_process_kind
Revises: r0011_audit_sessions
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0012_process_kind"
down_revision: str | None = "r0011_audit_sessions"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("kind", sa.String(20), nullable=False, server_default="worker"))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("kind")
