"""Run alerts: a job's start deadline and SLA, and the alerts fired (once per run and kind).

Revision ID: r0017_run_alerts
Revises: r0016_dashboard_filters
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0017_run_alerts"
down_revision: str | None = "r0016_dashboard_filters"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("start_deadline", sa.Float))
        batch.add_column(sa.Column("sla", sa.Float))
    for name in ("start_deadline", "sla"):
        where = sa.text(f"{name} IS NOT NULL")
        op.create_index(
            f"ix_jobs_{name}", "jobs", [name], sqlite_where=where, postgresql_where=where
        )
    op.create_table(
        "run_alerts",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(20), primary_key=True),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("job_name", sa.String(200), nullable=False),
        sa.Column("logical_date", sa.DateTime(timezone=True), nullable=False),
        sa.Column("limit_seconds", sa.Float, nullable=False),
        sa.Column("late_seconds", sa.Float, nullable=False),
        sa.Column("fired_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_run_alerts_fired_at", "run_alerts", ["fired_at"])
    op.create_index("ix_run_alerts_job_name_fired_at", "run_alerts", ["job_name", "fired_at"])


def downgrade() -> None:
    op.drop_table("run_alerts")
    op.drop_index("ix_jobs_sla", "jobs")
    op.drop_index("ix_jobs_start_deadline", "jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("sla")
        batch.drop_column("start_deadline")
