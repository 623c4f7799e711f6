"""Jobs get a jitter: seconds a cron fire's run may be due after its logical date.

One nullable float column (``null``: the fleet's ``cron_spread`` applies; see core/jitter.py).

Revision ID: r0018_job_jitter
Revises: r0017_run_alerts
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0018_job_jitter"
down_revision: str | None = "r0017_run_alerts"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("jitter", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("jitter")
