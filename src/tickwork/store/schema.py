"""SQLAlchemy Core tables for the SQL store (SQLite and PostgreSQL).

Migrations in ``migrations/`` must produce exactly this metadata; a contract test checks it.
"""

from __future__ import annotations

import sqlalchemy as sa

from tickwork.store.columns import ID, NAME, PG_ONLY, SQLITE_ONLY, STATE, ts

metadata = sa.MetaData()

#: PostgreSQL partitions these tables by RANGE on a time-ordered id (``tickwork.ids``):
#: monthly partitions plus a DEFAULT one (``store/partitions.py``, migration r0008). A task
#: run's attempts and logs are keyed by its id, so they land in its month.
PARTITION_KEYS = {
    "runs": "id",
    "task_runs": "id",
    "attempts": "task_run_id",
    "task_logs": "task_run_id",
}

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", NAME, nullable=False),
    sa.Column("schedule_kind", sa.String(10), nullable=False),
    sa.Column("cron", sa.String(200)),
    sa.Column("timezone", sa.String(64), nullable=False),
    ts("at"),
    ts("start_at"),
    ts("end_at"),
    sa.Column("catchup", sa.Boolean, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False),
    sa.Column("queue", sa.String(100), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("retry", sa.JSON, nullable=False),
    sa.Column("timeout", sa.Float),
    sa.Column("tags", sa.JSON, nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Column("max_active_runs", sa.Integer),
    sa.Column("depends_on_past", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("callbacks", sa.JSON),
    ts("next_fire_at"),
    ts("last_fire_at"),
    ts("created_at", nullable=False),
    ts("updated_at", nullable=False),
    ts("deleted_at"),
    sa.Column("params", sa.JSON),  # the params contract (core.params); null: none
    sa.Column("start_deadline", sa.Float),  # seconds; null: core.alerts' default
    sa.Column("sla", sa.Float),  # seconds; null: none
    sa.Column("jitter", sa.Float),  # seconds (core.jitter); null: the fleet's cron_spread
)
# A name is unique among live jobs only: a deleted job's history keeps its name.
sa.Index(
    "uq_jobs_live_name",
    jobs.c.name,
    unique=True,
    sqlite_where=jobs.c.deleted_at.is_(None),
    postgresql_where=jobs.c.deleted_at.is_(None),
)
sa.Index("ix_jobs_next_fire_at", jobs.c.next_fire_at)
# The jobs page filtered by queue, in name order.
sa.Index(
    "ix_jobs_live_queue_name",
    jobs.c.queue,
    jobs.c.name,
    sqlite_where=jobs.c.deleted_at.is_(None),
    postgresql_where=jobs.c.deleted_at.is_(None),
)
# The alert check reads the distinct limits jobs set (store/alerts.py): the few that set one.
for _limit in (jobs.c.start_deadline, jobs.c.sla):
    sa.Index(
        f"ix_jobs_{_limit.name}",
        _limit,
        sqlite_where=_limit.is_not(None),
        postgresql_where=_limit.is_not(None),
    )

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("job_id", ID, sa.ForeignKey("jobs.id"), primary_key=True),
    sa.Column("name", NAME, primary_key=True),
    sa.Column("kind", sa.String(10), nullable=False),
    sa.Column("config", sa.JSON, nullable=False),
    sa.Column("upstream", sa.JSON, nullable=False),
    sa.Column("timeout", sa.Float),
    sa.Column("retry", sa.JSON),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("trigger_rule", STATE, nullable=False, server_default="all_success"),
    sa.Column("priority", sa.Integer),
    sa.Column("pool", NAME),
    sa.Column("pool_slots", sa.Integer, nullable=False, server_default="1"),
    sa.Column("callbacks", sa.JSON),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("job_id", ID, sa.ForeignKey("jobs.id"), nullable=False),
    sa.Column("job_name", NAME, nullable=False),
    ts("logical_date", nullable=False),
    sa.Column("state", STATE, nullable=False),
    sa.Column("trigger", sa.String(10), nullable=False),
    ts("created_at", nullable=False),
    ts("started_at"),
    ts("finished_at"),
)
#: Runs that are not enqueued (cron fires, ``at``/``now`` runs, manual triggers) are unique per
#: job and logical date: two schedulers materializing the same cron fire collide here and the
#: second is a no-op. Enqueued runs (task-queue style) may share an instant.
RUNS_UNIQUE_WHERE = sa.text("trigger <> 'enqueue'")
sa.Index(
    "uq_runs_job_logical_date",
    runs.c.job_id,
    runs.c.logical_date,
    unique=True,
    sqlite_where=RUNS_UNIQUE_WHERE,
    info=SQLITE_ONLY,  # PostgreSQL: ``run_keys`` (runs are partitioned by id there)
)
# Newest-first listing scans these backwards (logical_date DESC, id DESC).
sa.Index("ix_runs_job_logical_date_id", runs.c.job_id, runs.c.logical_date, runs.c.id)
sa.Index("ix_runs_logical_date_id", runs.c.logical_date, runs.c.id)
sa.Index("ix_runs_state_logical_date", runs.c.state, runs.c.logical_date)
sa.Index("ix_runs_trigger_logical_date_id", runs.c.trigger, runs.c.logical_date, runs.c.id)
# ``max_active_runs``: a job's unfinished runs older than a given one.
_UNFINISHED = runs.c.state.in_(("scheduled", "queued", "running"))
sa.Index(
    "ix_runs_unfinished",
    runs.c.job_id,
    runs.c.logical_date,
    sqlite_where=_UNFINISHED,
    postgresql_where=_UNFINISHED,
)

task_runs = sa.Table(
    "task_runs",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("run_id", ID, nullable=False),
    sa.Column("job_id", ID, nullable=False),
    sa.Column("job_name", NAME, nullable=False),
    sa.Column("task_name", NAME, nullable=False),
    sa.Column("kind", sa.String(10), nullable=False),
    sa.Column("config", sa.JSON, nullable=False),
    sa.Column("state", STATE, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("retry", sa.JSON, nullable=False),
    ts("due_at", nullable=False),
    ts("logical_date", nullable=False),
    sa.Column("timeout", sa.Float),
    sa.Column("queue", sa.String(100), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("upstream", sa.JSON, nullable=False),
    ts("queued_at"),
    ts("started_at"),
    ts("finished_at"),
    ts("heartbeat_at"),
    sa.Column("worker_id", sa.String(200)),
    sa.Column("error", sa.Text),
    sa.Column("exit_code", sa.Integer),
    sa.Column("cancel_requested", sa.Boolean, nullable=False),
    sa.Column("trigger_rule", STATE, nullable=False, server_default="all_success"),
    sa.Column("pool", NAME),
    sa.Column("pool_slots", sa.Integer, nullable=False, server_default="1"),
    sa.Column("depends_on_past", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("callbacks", sa.JSON),
    sa.Column("result", sa.Text),
    # SQLite only, like the two below: see store/partitions.py for PostgreSQL.
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], info=SQLITE_ONLY),
)
# The watcher's, re-sender's and reaper's queries: partial indexes, each holding only the
# rows in its query's state, so a finished task run costs these indexes nothing (a claim
# moves a row from the queued index to the running one, a success takes it out) and an old
# partition's index is empty. Each query's ``state`` predicate must imply the index's
# (store/dispatch.py, store/runs.py); SQLite proves that only for the index's own term, so
# its due indexes are one per state (``dispatch._in_state``: ``state = 'scheduled'``).
sa.Index(
    "ix_task_runs_due",
    task_runs.c.state,  # one state's range at a time, in due order (dispatch.next_due_at)
    task_runs.c.due_at,
    postgresql_where=task_runs.c.state.in_(("scheduled", "up_for_retry")),
    info=PG_ONLY,
)
for _state in ("scheduled", "up_for_retry"):
    sa.Index(
        f"ix_task_runs_{_state}",
        task_runs.c.due_at,
        sqlite_where=task_runs.c.state == _state,
        info=SQLITE_ONLY,
    )
for _state, _column in (
    ("queued", task_runs.c.queued_at),
    ("running", task_runs.c.heartbeat_at),
    ("failed", task_runs.c.finished_at),
):
    sa.Index(
        f"ix_task_runs_{_state}",
        _column,
        task_runs.c.id,
        sqlite_where=task_runs.c.state == _state,
        postgresql_where=task_runs.c.state == _state,
    )
sa.Index("ix_task_runs_run_id", task_runs.c.run_id)
# A job's task runs; with the task name and logical date, ``depends_on_past``'s lookup.
sa.Index(
    "ix_task_runs_job_task_logical",
    task_runs.c.job_id,
    task_runs.c.task_name,
    task_runs.c.logical_date,
)
# Slots in use: the queued and running task runs of a pool.
sa.Index(
    "ix_task_runs_pool_state",
    task_runs.c.pool,
    task_runs.c.state,
    sqlite_where=task_runs.c.pool.is_not(None),
    postgresql_where=task_runs.c.pool.is_not(None),
)

pools = sa.Table(
    "pools",
    metadata,
    sa.Column("name", NAME, primary_key=True),
    sa.Column("slots", sa.Integer, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    ts("created_at", nullable=False),
    ts("updated_at", nullable=False),
)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("task_run_id", ID, primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("state", STATE, nullable=False),
    ts("started_at"),
    ts("finished_at", nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("exit_code", sa.Integer),
    sa.Column("worker_id", sa.String(200)),
    sa.ForeignKeyConstraint(["task_run_id"], ["task_runs.id"], info=SQLITE_ONLY),
)

task_logs = sa.Table(
    "task_logs",
    metadata,
    sa.Column("task_run_id", ID, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("stream", sa.String(10), nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    ts("created_at", nullable=False),
    sa.ForeignKeyConstraint(["task_run_id"], ["task_runs.id"], info=SQLITE_ONLY),
)

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", NAME, nullable=False),
    sa.Column("scope", sa.String(10), nullable=False),
    sa.Column("secret_hash", sa.String(64), nullable=False),
    ts("created_at", nullable=False),
    ts("last_used_at"),
    ts("revoked_at"),
)
sa.Index(
    "uq_api_tokens_live_name",
    api_tokens.c.name,
    unique=True,
    sqlite_where=api_tokens.c.revoked_at.is_(None),
    postgresql_where=api_tokens.c.revoked_at.is_(None),
)

idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    # The primary key is the lock: of two requests with one key, one insert wins.
    sa.Column("token_id", sa.String(32), primary_key=True),
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("status", sa.Integer),
    sa.Column("response", sa.Text),
    ts("created_at", nullable=False),
    ts("expires_at", nullable=False),
)
sa.Index("ix_idempotency_keys_expires_at", idempotency_keys.c.expires_at)

workers = sa.Table(
    "workers",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("hostname", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("queues", sa.JSON, nullable=False),
    sa.Column("concurrency", sa.Integer, nullable=False),
    ts("started_at", nullable=False),
    ts("heartbeat_at", nullable=False),
    sa.Column("running", sa.Integer, nullable=False),
    ts("stopped_at"),
    # "worker", or "scheduler" for a scheduler replica (status lists leader and standbys).
    sa.Column("kind", sa.String(20), nullable=False, server_default="worker"),
)

# PostgreSQL only: the (job, logical date) uniqueness of runs, which a table partitioned by
# id cannot enforce. Written in the run's transaction (store/run_keys.py); runs with the
# trigger ``enqueue`` have no key. Deleting a run deletes its key.
run_keys = sa.Table(
    "run_keys",
    metadata,
    sa.Column("job_id", ID, primary_key=True),
    ts("logical_date", primary_key=True),
    sa.Column("run_id", ID, nullable=False),
    info=PG_ONLY,
)

leases = sa.Table(
    "leases",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False),
    # The fencing token (epoch): only ever increases, because a row is never deleted.
    sa.Column("token", sa.BigInteger, nullable=False),
    ts("acquired_at", nullable=False),
    ts("renewed_at", nullable=False),
    ts("expires_at", nullable=False),
)

# Backfills (store/backfills.py): one row per backfill, and one per date it has decided
# (created lazily, a step at a time). ``outcome`` stays NULL while the date's run is unfinished,
# so a step reads only the open rows of its backfill (the partial index), never all of them.
backfills = sa.Table(
    "backfills",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("job_id", ID, nullable=False),
    sa.Column("job_name", NAME, nullable=False),
    ts("range_start", nullable=False),
    ts("range_end", nullable=False),
    sa.Column("mode", sa.String(20), nullable=False),
    sa.Column("max_active", sa.Integer, nullable=False),
    sa.Column("chunk_size", sa.Integer, nullable=False),
    sa.Column("reprocess", sa.String(20), nullable=False),
    sa.Column("reverse", sa.Boolean, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("state", STATE, nullable=False),
    sa.Column("total", sa.Integer, nullable=False),
    ts("cursor"),
    sa.Column("exhausted", sa.Boolean, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text),
    ts("created_at", nullable=False),
    ts("updated_at", nullable=False),
    ts("finished_at"),
)
sa.Index("ix_backfills_state", backfills.c.state)
sa.Index("ix_backfills_job_id", backfills.c.job_id)

backfill_runs = sa.Table(
    "backfill_runs",
    metadata,
    sa.Column("backfill_id", ID, primary_key=True),
    ts("logical_date", primary_key=True),
    sa.Column("run_id", ID, nullable=False),
    sa.Column("action", sa.String(10), nullable=False),
    sa.Column("outcome", STATE),
    ts("created_at", nullable=False),
)
sa.Index(
    "ix_backfill_runs_open",
    backfill_runs.c.backfill_id,
    sqlite_where=backfill_runs.c.outcome.is_(None),
    postgresql_where=backfill_runs.c.outcome.is_(None),
)
sa.Index("ix_backfill_runs_run_id", backfill_runs.c.run_id)

# The highest fencing token a write has carried, per lease name, for leases held outside the
# database (etcd, ZooKeeper): see fences.py. Like a lease row, never deleted.
fences = sa.Table(
    "fences",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("token", sa.BigInteger, nullable=False),
)
# Alerts fired (core.alerts): one row per run and kind, written by the leader in a fenced
# transaction before its callback fires, so no alert fires twice, even across a failover.
run_alerts = sa.Table(
    "run_alerts",
    metadata,
    sa.Column("run_id", ID, primary_key=True),
    sa.Column("kind", sa.String(20), primary_key=True),  # on_missed | on_sla_miss
    sa.Column("job_id", ID, nullable=False),
    sa.Column("job_name", NAME, nullable=False),
    ts("logical_date", nullable=False),
    sa.Column("limit_seconds", sa.Float, nullable=False),
    sa.Column("late_seconds", sa.Float, nullable=False),
    ts("fired_at", nullable=False),  # when the leader recorded it (the payload's fired_at)
    ts("hook_done_at"),  # when its callback ran to its end; null: to fire (again)
)
sa.Index("ix_run_alerts_fired_at", run_alerts.c.fired_at)
# The leader's look for alerts whose callback never ran (store/alerts.py): only those.
sa.Index(
    "ix_run_alerts_hook_not_done",
    run_alerts.c.fired_at,
    sqlite_where=run_alerts.c.hook_done_at.is_(None),
    postgresql_where=run_alerts.c.hook_done_at.is_(None),
)
sa.Index("ix_run_alerts_job_name_fired_at", run_alerts.c.job_name, run_alerts.c.fired_at)

# Every action taken through the API or the dashboard (store/web.py). Ids sort by time.
audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", ID, primary_key=True),
    ts("at", nullable=False),
    sa.Column("token_id", sa.String(32), nullable=False),
    sa.Column("token_name", NAME, nullable=False),
    sa.Column("source", sa.String(20), nullable=False),
    sa.Column("action", sa.String(100), nullable=False),
    sa.Column("target", sa.String(500), nullable=False),
    sa.Column("detail", sa.JSON, nullable=False),
    sa.Column("outcome", sa.String(20), nullable=False),
)
sa.Index("ix_audit_log_token_name_id", audit_log.c.token_name, audit_log.c.id)

# Dashboard sign-ins: the SHA-256 of the cookie's secret, the token it acts as, its CSRF token.
web_sessions = sa.Table(
    "web_sessions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("token_id", sa.String(32), nullable=False),
    sa.Column("csrf", sa.String(64), nullable=False),
    ts("created_at", nullable=False),
    ts("expires_at", nullable=False),
)
sa.Index("ix_web_sessions_expires_at", web_sessions.c.expires_at)

#: Children first, so deleting in this order never trips a foreign key.
TABLES_CHILDREN_FIRST = (
    task_logs,
    attempts,
    task_runs,
    runs,
    tasks,
    jobs,
    api_tokens,
    idempotency_keys,
    pools,
    workers,
    leases,
    fences,
    run_alerts,
    run_keys,
    backfill_runs,
    backfills,
    audit_log,
    web_sessions,
)
