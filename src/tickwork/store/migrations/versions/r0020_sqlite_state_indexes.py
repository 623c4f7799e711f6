"""SQLite: the task runs' state indexes partial, one per state, as on PostgreSQL.

Each of the three indexes on (state, time) held every task run, so every change of state
(a claim: queued to running; a completion: running to success) deleted and inserted an
entry in all three, and finished task runs filled them. A partial index per state holds only
the rows in it: a claim moves a row from the queued index to the running one, a success
takes it out of both, and the failed ones get the index their reads use (as PostgreSQL's
``ix_task_runs_failed``). SQLite uses a partial index only for a query naming the index's
own term (``state = 'scheduled'``), so the due index is one per dispatchable state.

PostgreSQL: nothing changes (its indexes are partial already).

Revision ID: r0020_sqlite_state_indexes
Revises: r0019_alert_hooks
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0020_sqlite_state_indexes"
down_revision: str | None = "r0019_alert_hooks"
branch_labels: str | None = None
depends_on: str | None = None

_OLD = {
    "ix_task_runs_state_due_at": ["state", "due_at"],
    "ix_task_runs_state_heartbeat_at": ["state", "heartbeat_at"],
    "ix_task_runs_state_queued_at": ["state", "queued_at"],
}
_NEW = {
    "scheduled": ["due_at"],
    "up_for_retry": ["due_at"],
    "queued": ["queued_at", "id"],
    "running": ["heartbeat_at", "id"],
    "failed": ["finished_at", "id"],
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name in _OLD:
        op.drop_index(name, "task_runs")
    for state, columns in _NEW.items():
        where = sa.text(f"state = '{state}'")
        op.create_index(f"ix_task_runs_{state}", "task_runs", columns, sqlite_where=where)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for state in _NEW:
        op.drop_index(f"ix_task_runs_{state}", "task_runs")
    for name, columns in _OLD.items():
        op.create_index(name, "task_runs", columns)
