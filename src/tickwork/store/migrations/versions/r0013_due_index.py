"""PostgreSQL: the due-work index on (state, due_at) instead of (due_at), so the scheduler's
``next_due_at`` reads the first entry of one state's range instead of walking the index past
every row of the other state (100,000 pending ``scheduled`` rows before the first
``up_for_retry`` one: 74 ms per pass, against 0.1 ms).

SQLite: nothing changes (its index is on (state, due_at) already).

Revision ID: r0013_due_index
Revises: r0012_process_kind
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision: str = "r0013_due_index"
down_revision: str | None = "r0012_process_kind"
branch_labels: str | None = None
depends_on: str | None = None

_DUE = "WHERE state IN ('scheduled', 'up_for_retry')"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX ix_task_runs_due")
    op.execute(f"CREATE INDEX ix_task_runs_due ON task_runs (state, due_at) {_DUE}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX ix_task_runs_due")
    op.execute(f"CREATE INDEX ix_task_runs_due ON task_runs (due_at) {_DUE}")
