"""``GET /api/v1/status``: the cluster as ``tickwork status`` shows it."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from tickwork.app.status import StatusReport
from tickwork.ports.alerts import FiredAlert


class WarningRead(BaseModel):
    code: str
    message: str
    queue: str | None = None


class QueueRead(BaseModel):
    queue: str
    due: int
    queued: int
    running: int
    oldest_seconds: float | None
    workers: int
    busy: int
    free: int


class ProcessRead(BaseModel):
    id: str
    kind: str
    hostname: str
    pid: int
    queues: list[str]
    concurrency: int
    running: int
    heartbeat_at: datetime
    live: bool


class LeaderRead(BaseModel):
    """The scheduler that leads: its registry id (the lease holder), epoch and lease expiry
    (both None for ``tickwork up``, which leads alone without a lease)."""

    holder: str
    epoch: int | None
    lease_expires_at: datetime | None
    live: bool = True  # a leader is only reported while its lease is live


class AlertRead(BaseModel):
    """A run alert: ``run_id`` passed its ``limit_seconds`` (from its logical date) by
    ``late_seconds``; ``kind`` is the hook it fired: ``on_missed`` or ``on_sla_miss``."""

    kind: str
    job_name: str
    run_id: str
    logical_date: datetime
    limit_seconds: float
    late_seconds: float
    fired_at: datetime

    @classmethod
    def of(cls, a: FiredAlert) -> AlertRead:
        return cls(
            kind=a.kind.value,
            job_name=a.job_name,
            run_id=a.run_id,
            logical_date=a.logical_date,
            limit_seconds=a.limit_seconds,
            late_seconds=a.late_seconds,
            fired_at=a.fired_at,
        )


class StatusRead(BaseModel):
    """The leader and standbys, workers, queues, and what needs attention (``warnings``)."""

    taken_at: datetime
    version: str
    schema_revision: str | None
    mode: str
    leader: LeaderRead | None
    standbys: list[str]
    workers: list[ProcessRead]
    queues: list[QueueRead]
    served_queues: list[str]
    dead_letters: int
    missed_fires_last_hour: int
    missed_runs_last_hour: int = Field(
        description="Runs that did not start within their job's start_deadline (on_missed)."
    )
    sla_misses_last_hour: int = Field(
        description="Runs that did not finish within their job's sla (on_sla_miss)."
    )
    alerts: list[AlertRead] = Field(description="The newest run alerts of the last hour.")
    warnings: list[WarningRead]

    @classmethod
    def of(cls, r: StatusReport) -> StatusRead:
        leader = (
            None
            if r.leader is None
            else LeaderRead(holder=r.leader, epoch=r.epoch, lease_expires_at=r.lease_expires_at)
        )
        return cls(
            taken_at=r.taken_at,
            version=r.version,
            schema_revision=r.schema_revision,
            mode=r.mode,
            leader=leader,
            standbys=r.standbys,
            workers=[
                ProcessRead(
                    id=p.info.id,
                    kind=p.info.kind,
                    hostname=p.info.hostname,
                    pid=p.info.pid,
                    queues=list(p.info.queues),
                    concurrency=p.info.concurrency,
                    running=p.info.running,
                    heartbeat_at=p.info.heartbeat_at,
                    live=p.live,
                )
                for p in r.workers
            ],
            queues=[QueueRead(**vars_of(q)) for q in r.queues],
            served_queues=r.served,
            dead_letters=r.dead_letters,
            missed_fires_last_hour=r.missed_fires,
            missed_runs_last_hour=r.alerts.missed,
            sla_misses_last_hour=r.alerts.sla_misses,
            alerts=[AlertRead.of(a) for a in r.alerts.newest],
            warnings=[
                WarningRead(code=w.code, message=w.message, queue=w.queue) for w in r.warnings
            ],
        )


def vars_of(q: object) -> dict[str, object]:
    return {name: getattr(q, name) for name in QueueRead.model_fields}
