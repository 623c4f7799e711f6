"""Run alerts remember whether their callback ran: ``hook_done_at``, null until it did.

A leader that records an alert and stops before its ``on_missed`` / ``on_sla_miss`` callback
ran leaves ``hook_done_at`` null; the next look of a leader fires it again (at least once).
Alerts already on record count as done: they fired, or never will, under the old rule. A
partial index holds only the alerts not done, so the leader's look costs what they are.

Revision ID: r0019_alert_hooks
Revises: r0018_job_jitter
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "r0019_alert_hooks"
down_revision: str | None = "r0018_job_jitter"
branch_labels: str | None = None
depends_on: str | None = None

_NOT_DONE = sa.text("hook_done_at IS NULL")


def upgrade() -> None:
    with op.batch_alter_table("run_alerts") as batch:
        batch.add_column(sa.Column("hook_done_at", sa.DateTime(timezone=True)))
    op.execute("UPDATE run_alerts SET hook_done_at = fired_at")
    op.create_index(
        "ix_run_alerts_hook_not_done",
        "run_alerts",
        ["fired_at"],
        sqlite_where=_NOT_DONE,
        postgresql_where=_NOT_DONE,
    )


def downgrade() -> None:
    op.drop_index("ix_run_alerts_hook_not_done", "run_alerts")
    with op.batch_alter_table("run_alerts") as batch:
        batch.drop_column("hook_done_at")
