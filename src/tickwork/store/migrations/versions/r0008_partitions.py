"""PostgreSQL: runs, task_runs, attempts and task_logs partitioned by month of their ids.

Each table is rebuilt as a partitioned table (RANGE on ``id``, or ``task_run_id`` for
attempts and logs; see ``store/partitions.py``) with one partition per month from its oldest
row to two months ahead plus a DEFAULT one, and its rows are copied over. Uniqueness of
(job, logical date) moves to the unpartitioned ``run_keys`` table. The hot indexes become
partial (``store/schema.py``). The foreign keys among the four tables are not recreated
(a partition referenced by one cannot be dropped cheaply); ``runs.job_id`` keeps its own.

SQLite: nothing changes.

Revision ID: r0008
Revises: r0007
Create Date: 2026-11-29
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from tickwork.store.partitions import (
    PARTITIONED,
    add_months,
    create_default_ddl,
    create_partition_ddl,
    month_of_id,
    month_start,
)

revision: str = "r0008"
down_revision: str | None = "r0007"
branch_labels: str | None = None
depends_on: str | None = None

KEYS = {"runs": "id", "task_runs": "id", "attempts": "task_run_id", "task_logs": "task_run_id"}
PRIMARY_KEYS = {
    "runs": "id",
    "task_runs": "id",
    "attempts": "task_run_id, attempt",
    "task_logs": "task_run_id, seq",
}
AHEAD = 2
OLD = "{}_unpartitioned"

INDEXES = (
    "CREATE INDEX ix_runs_job_logical_date_id ON runs (job_id, logical_date, id)",
    "CREATE INDEX ix_runs_logical_date_id ON runs (logical_date, id)",
    "CREATE INDEX ix_runs_state_logical_date ON runs (state, logical_date)",
    "CREATE INDEX ix_runs_unfinished ON runs (job_id, logical_date) "
    "WHERE state IN ('scheduled', 'queued', 'running')",
    "CREATE INDEX ix_task_runs_run_id ON task_runs (run_id)",
    "CREATE INDEX ix_task_runs_job_task_logical ON task_runs (job_id, task_name, logical_date)",
    "CREATE INDEX ix_task_runs_pool_state ON task_runs (pool, state) WHERE pool IS NOT NULL",
    "CREATE INDEX ix_task_runs_due ON task_runs (due_at) "
    "WHERE state IN ('scheduled', 'up_for_retry')",
    "CREATE INDEX ix_task_runs_queued ON task_runs (queued_at, id) WHERE state = 'queued'",
    "CREATE INDEX ix_task_runs_running ON task_runs (heartbeat_at, id) WHERE state = 'running'",
    "CREATE INDEX ix_task_runs_failed ON task_runs (finished_at, id) WHERE state = 'failed'",
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    months = _months(bind)
    for table in PARTITIONED:
        _set_aside(table)
    for table in PARTITIONED:
        op.execute(
            f"CREATE TABLE {table} (LIKE {OLD.format(table)} INCLUDING DEFAULTS) "
            f"PARTITION BY RANGE ({KEYS[table]})"
        )
        for month in months:
            op.execute(create_partition_ddl(table, month))
        op.execute(create_default_ddl(table))
        op.execute(f"INSERT INTO {table} SELECT * FROM {OLD.format(table)}")
        op.execute(f"ALTER TABLE {table} ADD PRIMARY KEY ({PRIMARY_KEYS[table]})")
    for statement in INDEXES:
        op.execute(statement)
    _run_keys()
    for table in reversed(PARTITIONED):
        op.execute(f"DROP TABLE {OLD.format(table)}")
    op.execute(
        "ALTER TABLE runs ADD CONSTRAINT runs_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id)"
    )
    for table in PARTITIONED:
        op.execute(f"ANALYZE {table}")


def _months(bind: sa.engine.Connection) -> list[datetime]:
    """Every month from the oldest row's to two months ahead (or to the newest row's)."""
    found: list[datetime] = []
    for table in PARTITIONED:
        key = KEYS[table]
        low, high = bind.execute(
            sa.text(f"SELECT min({key}), max({key}) FROM {table} WHERE {key} ~ '^[0-9a-f]{{12}}'")
        ).one()
        found += [m for m in (month_of_id(low or ""), month_of_id(high or "")) if m is not None]
    now = month_start(datetime.now(UTC))
    # Ids far from now were not made by tickwork.ids at the time; they go to DEFAULT.
    first = max(min(found, default=now), add_months(now, -120))
    last = min(max([*found, add_months(now, AHEAD)]), add_months(now, 12))
    months = [first]
    while months[-1] < last:
        months.append(add_months(months[-1], 1))
    return months


def _set_aside(table: str) -> None:
    """Rename the table, its indexes (and so its constraints), out of the new one's way."""
    op.execute(f"ALTER TABLE {table} RENAME TO {OLD.format(table)}")
    op.execute(
        f"""
        DO $$
        DECLARE name text;
        BEGIN
          FOR name IN SELECT indexname FROM pg_indexes
                      WHERE schemaname = current_schema() AND tablename = '{OLD.format(table)}'
          LOOP
            EXECUTE format('ALTER INDEX %I RENAME TO %I', name, name || '_unpartitioned');
          END LOOP;
        END $$
        """
    )


def _run_keys() -> None:
    op.create_table(
        "run_keys",
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("logical_date", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
    )
    # Runs of trigger 'enqueue' (task-queue style, many per instant) have no key; the store
    # writes the same rule (store/run_keys.py).
    op.execute(
        "INSERT INTO run_keys (job_id, logical_date, run_id) "
        "SELECT job_id, logical_date, id FROM runs WHERE trigger <> 'enqueue'"
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    raise NotImplementedError(
        "r0008 cannot be downgraded in place: restore a backup taken before the upgrade"
    )
