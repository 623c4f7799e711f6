"""Enqueued runs: ``(job_id, logical_date)`` is unique only for runs that are not enqueued.

A task-queue style run (``trigger = 'enqueue'``) has the enqueue instant as its logical date,
and many may share one instant, so the unique constraint becomes a partial unique index of
the same name. A cron fire stays unique per job and instant (materialization relies on it).

SQLite cannot drop a table constraint: the ``runs`` table is rebuilt. ``task_runs`` refers to
it and foreign keys are on (they cannot be switched off inside the migration's transaction),
so the rebuild defers them: dropping the old table counts each task run as a violation, and
inserting the rows into the new table (same name, same ids) counts each one back, so nothing
is left to report at commit.

Revision ID: r0007
Revises: r0006
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0007"
down_revision: str | None = "r0006"
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.String(64)
NAME = sa.String(200)
STATE = sa.String(20)
TS = sa.DateTime(timezone=True)
UNIQUE = "uq_runs_job_logical_date"
NOT_ENQUEUED = sa.text("trigger <> 'enqueue'")
_COLUMNS = "id, job_id, job_name, logical_date, state, trigger, created_at, started_at, finished_at"
_UNFINISHED = sa.text("state IN ('scheduled', 'queued', 'running')")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_runs(unique_constraint=False)
    else:
        op.drop_constraint(UNIQUE, "runs", type_="unique")
    op.create_index(
        UNIQUE,
        "runs",
        ["job_id", "logical_date"],
        unique=True,
        sqlite_where=NOT_ENQUEUED,
        postgresql_where=NOT_ENQUEUED,
    )


def downgrade() -> None:
    # Fails (unique violation) while enqueued runs share a job and instant: delete them first.
    op.drop_index(UNIQUE, table_name="runs")
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_runs(unique_constraint=True)
    else:
        op.create_unique_constraint(UNIQUE, "runs", ["job_id", "logical_date"])


def _rebuild_runs(*, unique_constraint: bool) -> None:
    op.execute("PRAGMA defer_foreign_keys = ON")  # reset by SQLite at commit
    op.execute(f"CREATE TABLE _r0007_runs AS SELECT {_COLUMNS} FROM runs")
    op.drop_table("runs")  # its indexes go with it
    constraints = [sa.UniqueConstraint("job_id", "logical_date", name=UNIQUE)]
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
        *(constraints if unique_constraint else []),
    )
    op.execute(f"INSERT INTO runs ({_COLUMNS}) SELECT {_COLUMNS} FROM _r0007_runs")
    op.drop_table("_r0007_runs")
    op.create_index("ix_runs_job_logical_date_id", "runs", ["job_id", "logical_date", "id"])
    op.create_index("ix_runs_logical_date_id", "runs", ["logical_date", "id"])
    op.create_index("ix_runs_state_logical_date", "runs", ["state", "logical_date"])
    op.create_index(
        "ix_runs_unfinished",
        "runs",
        ["job_id", "logical_date"],
        sqlite_where=_UNFINISHED,
        postgresql_where=_UNFINISHED,
    )
