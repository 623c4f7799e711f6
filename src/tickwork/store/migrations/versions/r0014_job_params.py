"""Jobs get a params contract: the params trigger/enqueue callers may pass, and who may.

One nullable JSON column (``null``: no params accepted, the job's own scope runs it).

Revision ID: r0014_job_params
Revises: r0013_due_index
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0014_job_params"
down_revision: str | None = "r0013_due_index"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("params", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("params")
