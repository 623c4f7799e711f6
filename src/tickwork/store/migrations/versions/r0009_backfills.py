"""Backfills: the ``backfills`` table and the per-date ``backfill_runs`` record.

Revision ID: r0009
Revises: r0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0009"
down_revision: str | None = "r0008"
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.String(64)
NAME = sa.String(200)
STATE = sa.String(20)
TS = sa.DateTime(timezone=True)
OPEN = sa.text("outcome IS NULL")


def upgrade() -> None:
    op.create_table(
        "backfills",
        sa.Column("id", ID, primary_key=True),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("job_name", NAME, nullable=False),
        sa.Column("range_start", TS, nullable=False),
        sa.Column("range_end", TS, nullable=False),
        sa.Column("mode", sa.String(20), nullable=False),
        sa.Column("max_active", sa.Integer, nullable=False),
        sa.Column("chunk_size", sa.Integer, nullable=False),
        sa.Column("reprocess", sa.String(20), nullable=False),
        sa.Column("reverse", sa.Boolean, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("state", STATE, nullable=False),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("cursor", TS),
        sa.Column("exhausted", sa.Boolean, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("finished_at", TS),
    )
    op.create_index("ix_backfills_state", "backfills", ["state"])
    op.create_index("ix_backfills_job_id", "backfills", ["job_id"])
    op.create_table(
        "backfill_runs",
        sa.Column("backfill_id", ID, primary_key=True),
        sa.Column("logical_date", TS, primary_key=True),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("action", sa.String(10), nullable=False),
        sa.Column("outcome", STATE),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index(
        "ix_backfill_runs_open",
        "backfill_runs",
        ["backfill_id"],
        sqlite_where=OPEN,
        postgresql_where=OPEN,
    )
    op.create_index("ix_backfill_runs_run_id", "backfill_runs", ["run_id"])


def downgrade() -> None:
    op.drop_table("backfill_runs")
    op.drop_table("backfills")
