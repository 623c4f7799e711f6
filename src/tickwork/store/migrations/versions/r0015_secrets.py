"""Secrets: values encrypted at rest (Fernet), referenced from task configs by name.

Revision ID: r0015_secrets
Revises: r0014_job_params
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0015_secrets"
down_revision: str | None = "r0014_job_params"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("ciphertext", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("secrets")
