"""DAG workflows: trigger rules, task priorities, pools, callbacks, results, run limits.

Revision ID: r0004
Revises: r0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0004"
down_revision: str | None = "r0003"
branch_labels: str | None = None
depends_on: str | None = None

NAME = sa.String(200)
STATE = sa.String(20)
TS = sa.DateTime(timezone=True)


def _task_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("trigger_rule", STATE, nullable=False, server_default="all_success"),
        sa.Column("pool", NAME),
        sa.Column("pool_slots", sa.Integer, nullable=False, server_default="1"),
        sa.Column("callbacks", sa.JSON),
    ]


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("max_active_runs", sa.Integer))
        batch.add_column(
            sa.Column("depends_on_past", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("callbacks", sa.JSON))
    with op.batch_alter_table("tasks") as batch:
        for column in _task_columns():
            batch.add_column(column)
        batch.add_column(sa.Column("priority", sa.Integer))
    with op.batch_alter_table("task_runs") as batch:
        for column in _task_columns():
            batch.add_column(column)
        batch.add_column(
            sa.Column("depends_on_past", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("result", sa.Text))
    op.create_index(
        "ix_task_runs_pool_state",
        "task_runs",
        ["pool", "state"],
        sqlite_where=sa.text("pool IS NOT NULL"),
        postgresql_where=sa.text("pool IS NOT NULL"),
    )
    op.drop_index("ix_task_runs_job_id", table_name="task_runs")
    op.create_index(
        "ix_task_runs_job_task_logical", "task_runs", ["job_id", "task_name", "logical_date"]
    )
    unfinished = sa.text("state IN ('scheduled', 'queued', 'running')")
    op.create_index(
        "ix_runs_unfinished",
        "runs",
        ["job_id", "logical_date"],
        sqlite_where=unfinished,
        postgresql_where=unfinished,
    )
    op.create_table(
        "pools",
        sa.Column("name", NAME, primary_key=True),
        sa.Column("slots", sa.Integer, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pools")
    op.drop_index("ix_runs_unfinished", table_name="runs")
    op.drop_index("ix_task_runs_job_task_logical", table_name="task_runs")
    op.create_index("ix_task_runs_job_id", "task_runs", ["job_id"])
    op.drop_index("ix_task_runs_pool_state", table_name="task_runs")
    with op.batch_alter_table("task_runs") as batch:
        for name in ("result", "depends_on_past", "callbacks", "pool_slots", "pool"):
            batch.drop_column(name)
        batch.drop_column("trigger_rule")
    with op.batch_alter_table("tasks") as batch:
        for name in ("priority", "callbacks", "pool_slots", "pool", "trigger_rule"):
            batch.drop_column(name)
    with op.batch_alter_table("jobs") as batch:
        for name in ("callbacks", "depends_on_past", "max_active_runs"):
            batch.drop_column(name)
