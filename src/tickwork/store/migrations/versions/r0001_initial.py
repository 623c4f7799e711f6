"""Initial schema: jobs, tasks, runs, task_runs, attempts, task_logs.

Revision ID: r0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.String(64)
NAME = sa.String(200)
STATE = sa.String(20)
TS = sa.DateTime(timezone=True)
LIVE = sa.text("deleted_at IS NULL")


def upgrade() -> None:
    _jobs()
    _tasks()
    _runs()
    _task_runs()
    _attempts_and_logs()


def _jobs() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("name", NAME, nullable=False),
        sa.Column("schedule_kind", sa.String(10), nullable=False),
        sa.Column("cron", sa.String(200)),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("at", TS),
        sa.Column("start_at", TS),
        sa.Column("end_at", TS),
        sa.Column("catchup", sa.Boolean, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("queue", sa.String(100), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("retry", sa.JSON, nullable=False),
        sa.Column("timeout", sa.Float),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("next_fire_at", TS),
        sa.Column("last_fire_at", TS),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("deleted_at", TS),
    )
    op.create_index(
        "uq_jobs_live_name",
        "jobs",
        ["name"],
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    )
    op.create_index("ix_jobs_next_fire_at", "jobs", ["next_fire_at"])


def _tasks() -> None:
    op.create_table(
        "tasks",
        sa.Column("job_id", ID, sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("name", NAME, primary_key=True),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("upstream", sa.JSON, nullable=False),
        sa.Column("timeout", sa.Float),
        sa.Column("retry", sa.JSON),
        sa.Column("position", sa.Integer, nullable=False),
    )


def _runs() -> None:
    op.create_table(
        "runs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("job_id", ID, sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("job_name", NAME, nullable=False),
        sa.Column("logical_date", TS, nullable=False),
        sa.Column("state", STATE, nullable=False),
        sa.Column("trigger", sa.String(10), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("started_at", TS),
        sa.Column("finished_at", TS),
        sa.UniqueConstraint("job_id", "logical_date", name="uq_runs_job_logical_date"),
    )
    op.create_index("ix_runs_job_logical_date_id", "runs", ["job_id", "logical_date", "id"])
    op.create_index("ix_runs_logical_date_id", "runs", ["logical_date", "id"])
    op.create_index("ix_runs_state_logical_date", "runs", ["state", "logical_date"])


def _task_runs() -> None:
    op.create_table(
        "task_runs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("run_id", ID, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("job_name", NAME, nullable=False),
        sa.Column("task_name", NAME, nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("state", STATE, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("retry", sa.JSON, nullable=False),
        sa.Column("due_at", TS, nullable=False),
        sa.Column("logical_date", TS, nullable=False),
        sa.Column("timeout", sa.Float),
        sa.Column("queue", sa.String(100), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("upstream", sa.JSON, nullable=False),
        sa.Column("queued_at", TS),
        sa.Column("started_at", TS),
        sa.Column("finished_at", TS),
        sa.Column("heartbeat_at", TS),
        sa.Column("worker_id", sa.String(200)),
        sa.Column("error", sa.Text),
        sa.Column("exit_code", sa.Integer),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
    )
    op.create_index("ix_task_runs_state_due_at", "task_runs", ["state", "due_at"])
    op.create_index("ix_task_runs_state_heartbeat_at", "task_runs", ["state", "heartbeat_at"])
    op.create_index("ix_task_runs_state_queued_at", "task_runs", ["state", "queued_at"])
    op.create_index("ix_task_runs_run_id", "task_runs", ["run_id"])
    op.create_index("ix_task_runs_job_id", "task_runs", ["job_id"])


def _attempts_and_logs() -> None:
    op.create_table(
        "attempts",
        sa.Column("task_run_id", ID, sa.ForeignKey("task_runs.id"), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("state", STATE, nullable=False),
        sa.Column("started_at", TS),
        sa.Column("finished_at", TS, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("exit_code", sa.Integer),
        sa.Column("worker_id", sa.String(200)),
    )
    op.create_table(
        "task_logs",
        sa.Column("task_run_id", ID, sa.ForeignKey("task_runs.id"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("stream", sa.String(10), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )


def downgrade() -> None:
    for table in ("task_logs", "attempts", "task_runs", "runs", "tasks", "jobs"):
        op.drop_table(table)
