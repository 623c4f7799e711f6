"""API tokens (hashed) and Idempotency-Key records.

Revision ID: r0002
Revises: r0001
Create Date: 2026-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0002"
down_revision: str | None = "r0001"
branch_labels: str | None = None
depends_on: str | None = None

TS = sa.DateTime(timezone=True)
LIVE = sa.text("revoked_at IS NULL")


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("scope", sa.String(10), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("last_used_at", TS),
        sa.Column("revoked_at", TS),
    )
    op.create_index(
        "uq_api_tokens_live_name",
        "api_tokens",
        ["name"],
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("token_id", sa.String(32), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.Integer),
        sa.Column("response", sa.Text),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("api_tokens")
