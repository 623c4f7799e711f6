"""The audit log and dashboard sign-ins (web sessions).

Revision ID: r0011_audit_sessions
Revises: r0010_fences
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0011_audit_sessions"
down_revision: str | None = "r0010_fences"
branch_labels: str | None = None
depends_on: str | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("at", TS, nullable=False),
        sa.Column("token_id", sa.String(32), nullable=False),
        sa.Column("token_name", sa.String(200), nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("target", sa.String(500), nullable=False),
        sa.Column("detail", sa.JSON, nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
    )
    op.create_index("ix_audit_log_token_name_id", "audit_log", ["token_name", "id"])
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("token_id", sa.String(32), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
    )
    op.create_index("ix_web_sessions_expires_at", "web_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_table("web_sessions")
    op.drop_table("audit_log")
