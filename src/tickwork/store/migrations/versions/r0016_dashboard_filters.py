"""Indexes for the dashboard's (and the API's) new filters: runs by trigger, newest first
(``GET /runs?trigger=``), and live jobs by queue in name order (``GET /jobs?queue=``).

Revision ID: r0016_dashboard_filters
Revises: r0015_secrets
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0016_dashboard_filters"
down_revision: str | None = "r0015_secrets"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_runs_trigger_logical_date_id", "runs", ["trigger", "logical_date", "id"])
    live = sa.text("deleted_at IS NULL")
    op.create_index(
        "ix_jobs_live_queue_name",
        "jobs",
        ["queue", "name"],
        sqlite_where=live,
        postgresql_where=live,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_live_queue_name", table_name="jobs")
    op.drop_index("ix_runs_trigger_logical_date_id", table_name="runs")
