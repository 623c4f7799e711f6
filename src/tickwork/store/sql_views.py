"""What the store keeps beside jobs, runs and dispatch: tokens, secrets, idempotency keys,
pools, workers, web sessions and the audit log, the dashboard's reads, alerts, "why" facts and
process facts. Each method is one query-module call in one transaction."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from tickwork.core.alerts import Alert, AlertKind
from tickwork.core.model import (
    LogChunk,
    Pool,
    Schedule,
    TaskRun,
)
from tickwork.core.why import WhyFacts
from tickwork.ports import (
    ApiToken,
    Fence,
    IdempotencyRecord,
    PoolUsage,
    StoredSecret,
    WorkerInfo,
)
from tickwork.ports.alerts import AlertCandidate, AlertSummary, UnfiredAlert
from tickwork.ports.facts import StoreFacts
from tickwork.ports.web import (
    AuditEntry,
    AuditPage,
    CronJob,
    GridColumn,
    QueueDepth,
    RecentRun,
    ScheduleGroup,
    StateCount,
    WebSession,
)
from tickwork.store import (
    alerts,
    dashboard_reads,
    facts,
    idempotency,
    pools,
    secrets,
    tokens,
    web,
    why,
    workers,
)
from tickwork.store.transactions import SqlTransactions


class SqlViews(SqlTransactions):
    """The ``Store`` port's parts beside the hot path (see ``SqlStore``)."""

    # -- tokens, idempotency keys, pools, workers ------------------------------------------
    async def create_token(self, token: ApiToken) -> None:
        await self._write(lambda conn: tokens.create_token(conn, token))

    async def get_token(self, token_id: str) -> ApiToken | None:
        return await self._read(lambda conn: tokens.get_token(conn, token_id))

    async def list_tokens(self) -> list[ApiToken]:
        return await self._read(tokens.list_tokens)

    async def revoke_token(self, id_or_name: str, now: datetime) -> ApiToken | None:
        return await self._write(lambda conn: tokens.revoke_token(conn, id_or_name, now))

    async def touch_token(self, token_id: str, now: datetime) -> None:
        await self._write(lambda conn: tokens.touch_token(conn, token_id, now))

    async def put_secret(self, name: str, ciphertext: str, now: datetime) -> bool:
        return await self._write(lambda conn: secrets.put_secret(conn, name, ciphertext, now))

    async def get_secrets(self, names: Collection[str]) -> dict[str, StoredSecret]:
        return await self._read(lambda conn: secrets.get_secrets(conn, names))

    async def list_secrets(self) -> list[StoredSecret]:
        return await self._read(secrets.list_secrets)

    async def delete_secret(self, name: str) -> bool:
        return await self._write(lambda conn: secrets.delete_secret(conn, name))

    async def get_key(self, token_id: str, key: str, now: datetime) -> IdempotencyRecord | None:
        return await self._read(lambda conn: idempotency.get_key(conn, token_id, key, now))

    async def purge_keys(self, now: datetime) -> int:
        return await self._write(lambda conn: idempotency.purge_keys(conn, now))

    async def set_pool(self, pool: Pool, now: datetime) -> bool:
        return await self._write(lambda conn: pools.set_pool(conn, pool, now))

    async def delete_pool(self, name: str) -> bool:
        return await self._write(lambda conn: pools.delete_pool(conn, name))

    async def list_pools(self) -> list[PoolUsage]:
        return await self._read(lambda conn: pools.pool_usage(conn, None))

    async def get_pool(self, name: str) -> PoolUsage | None:
        found = await self._read(lambda conn: pools.pool_usage(conn, [name]))
        return found[0] if found else None

    async def register_worker(self, worker: WorkerInfo) -> None:
        await self._write(lambda conn: workers.register_worker(conn, worker))

    async def worker_heartbeat(
        self, worker_id: str, now: datetime, running: int, stopped: bool = False
    ) -> None:
        await self._write_alone(
            lambda conn: workers.worker_heartbeat(conn, worker_id, now, running, stopped)
        )

    async def list_workers(self, seen_since: datetime | None = None) -> list[WorkerInfo]:
        return await self._read(lambda conn: workers.list_workers(conn, seen_since))

    async def forget_workers(self, seen_before: datetime) -> int:
        return await self._write(lambda conn: workers.forget_workers(conn, seen_before))

    # -- web -----------------------------------------------------------------
    async def record_audit(self, entries: Sequence[AuditEntry]) -> None:
        if entries:
            await self._write(lambda conn: web.record_audit(conn, entries))

    async def list_audit(
        self, *, limit: int = 50, cursor: str | None = None, token_name: str | None = None
    ) -> AuditPage:
        return await self._read(lambda conn: web.list_audit(conn, limit, cursor, token_name))

    async def last_audit(self, action: str, targets: Sequence[str]) -> AuditEntry | None:
        return await self._read(lambda conn: web.last_audit(conn, action, targets))

    async def create_web_session(self, session: WebSession) -> None:
        await self._write(lambda conn: web.create_web_session(conn, session))

    async def get_web_session(self, session_id: str, now: datetime) -> WebSession | None:
        return await self._read(lambda conn: web.get_web_session(conn, session_id, now))

    async def end_web_session(self, session_id: str, now: datetime) -> None:
        await self._write(lambda conn: web.end_web_session(conn, session_id, now))

    # -- dashboard reads -----------------------------------------------------
    async def run_state_counts(self, since: datetime) -> list[StateCount]:
        return await self._read(lambda conn: dashboard_reads.run_state_counts(conn, since))

    async def queue_depths(self) -> list[QueueDepth]:
        return await self._read(dashboard_reads.queue_depths)

    async def failing_now(self, since: datetime, limit: int) -> list[TaskRun]:
        return await self._read(lambda conn: dashboard_reads.failing_now(conn, since, limit))

    async def start_lateness(self, since: datetime, limit: int) -> list[float]:
        return await self._read(lambda conn: dashboard_reads.start_lateness(conn, since, limit))

    async def recent_run_states(
        self, job_ids: Sequence[str], per_job: int
    ) -> dict[str, list[RecentRun]]:
        return await self._read(
            lambda conn: dashboard_reads.recent_run_states(conn, job_ids, per_job)
        )

    async def grid(self, job_id: str, runs: int) -> list[GridColumn]:
        return await self._read(lambda conn: dashboard_reads.grid(conn, job_id, runs))

    async def running_task_runs(self, limit: int) -> list[TaskRun]:
        return await self._read(lambda conn: dashboard_reads.running_task_runs(conn, limit))

    async def pool_waiting(self) -> dict[str, int]:
        return await self._read(dashboard_reads.pool_waiting)

    async def dead_letter_count(self, cap: int) -> int:
        return await self._read(lambda conn: dashboard_reads.dead_letter_count(conn, cap))

    async def cron_schedules_firing_before(self, until: datetime) -> list[ScheduleGroup]:
        return await self._read(lambda conn: dashboard_reads.cron_schedules(conn, until))

    async def cron_jobs_of(self, schedules: Sequence[Schedule], until: datetime) -> list[CronJob]:
        return await self._read(lambda conn: dashboard_reads.cron_jobs_of(conn, schedules, until))

    async def log_tail(self, task_run_id: str, limit: int) -> list[LogChunk]:
        return await self._read(lambda conn: dashboard_reads.log_tail(conn, task_run_id, limit))

    async def change_digest(self) -> tuple[Any, ...]:
        return await self._read(dashboard_reads.change_digest)

    async def run_digest(self, run_id: str) -> tuple[Any, ...]:
        return await self._read(lambda conn: dashboard_reads.run_digest(conn, run_id))

    # -- alerts --------------------------------------------------------------
    async def alert_candidates(self, since: datetime, now: datetime) -> list[AlertCandidate]:
        return await self._read(lambda conn: alerts.alert_candidates(conn, since, now))

    async def record_alerts(
        self, fired: Sequence[Alert], now: datetime, *, fence: Fence | None = None
    ) -> list[Alert]:
        work = partial(alerts.record_alerts, dialect=self._d, alerts=fired, now=now)
        return await self._write(self._fenced(fence, work))

    async def unfired_alerts(self, recorded_before: datetime, limit: int) -> list[UnfiredAlert]:
        return await self._read(lambda conn: alerts.unfired_alerts(conn, recorded_before, limit))

    async def mark_hooks_done(
        self, keys: Sequence[tuple[str, AlertKind]], at: datetime, *, fence: Fence | None = None
    ) -> None:
        work = partial(alerts.mark_hooks_done, keys=keys, at=at)
        await self._write(self._fenced(fence, work))

    async def recent_alerts(
        self, since: datetime, *, job_name: str | None = None, limit: int = 50
    ) -> AlertSummary:
        return await self._read(lambda conn: alerts.recent_alerts(conn, since, job_name, limit))

    # -- why -----------------------------------------------------------------
    async def run_facts(self, run_id: str, workers_seen_since: datetime) -> WhyFacts | None:
        return await self._read(lambda conn: why.run_facts(conn, run_id, workers_seen_since))

    async def job_facts(
        self, name: str, workers_seen_since: datetime
    ) -> tuple[WhyFacts, list[WhyFacts]] | None:
        return await self._read(lambda conn: why.job_facts(conn, name, workers_seen_since))

    # -- facts ---------------------------------------------------------------
    async def facts(self, now: datetime, missed_since: datetime) -> StoreFacts:
        return await self._read(lambda conn: facts.read_facts(conn, now, missed_since))

    async def schema_revision(self) -> str | None:
        return await self._read(facts.schema_revision)

    async def server_facts(self) -> dict[str, str]:
        return await self._read(facts.server_facts)
