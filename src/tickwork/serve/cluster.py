"""The parts particular to distributed mode's scheduler and worker processes, over PostgreSQL
and Redis. The processes themselves are built by ``wiring.build_scheduler`` and
``wiring.build_worker``.

Each process is stateless: PostgreSQL is the record, Redis carries task-run keys. Any number
of each may run on any number of machines; schedulers elect one leader among themselves.
SIGTERM or SIGINT stops a process cleanly (a worker first lets running tasks finish within
its grace period); SIGKILL loses nothing either (the reaper and the reconciler recover).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from datetime import datetime

from tickwork.app.settings import Settings
from tickwork.core.errors import StoreUnavailable
from tickwork.hooks import Hooks
from tickwork.ids import new_id
from tickwork.observe import metrics
from tickwork.observe.health import Health
from tickwork.observe.logs import set_process_fields
from tickwork.ports import Broker, LeaseStore, Store
from tickwork.scheduler.ha import HAConfig, HAScheduler, Role, ha_scheduler, holder_id
from tickwork.scheduler.history import HistoryConfig
from tickwork.scheduler.loop import Listen, SchedulerConfig
from tickwork.serve.observed import broker_check

log = logging.getLogger("tickwork")

RESTART_DELAY = 1.0  # seconds a scheduler replica waits after a crash before campaigning


def scheduler_replica(
    settings: Settings,
    store: Store,
    broker: Broker,
    hooks: Hooks,
    *,
    clock: Callable[[], datetime],
    leases: LeaseStore | None = None,
    listen: Listen | None = None,
) -> HAScheduler:
    config = SchedulerConfig(
        window=settings.window,
        heartbeat_timeout=settings.heartbeat_timeout,
        reap_grace=settings.heartbeat_timeout,
        cron_spread=settings.cron_spread,
    )
    return ha_scheduler(
        store,
        broker,
        holder=holder_id(),
        clock=clock,
        rand=random.random,
        make_id=new_id,
        config=config,
        ha=HAConfig(ttl=settings.lease_ttl),
        hooks=hooks,
        leases=leases,
        listen=listen,
        history=HistoryConfig(
            retention_days=settings.retention_days or None, ahead=settings.partitions_ahead
        ),
    )


async def keep_campaigning(replica: HAScheduler) -> None:
    """Run the replica; after a crash (the database restarting, say) campaign again."""
    while True:
        try:
            await replica.run()
        except StoreUnavailable as exc:
            log.warning("scheduler: %s; campaigning again in %.0f s", exc, RESTART_DELAY)
        except Exception:
            log.exception("scheduler crashed; campaigning again in %.0f s", RESTART_DELAY)
        await asyncio.sleep(RESTART_DELAY)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


def leads(replica: HAScheduler) -> bool:
    return replica.status.role is Role.LEADER


def track_leadership(replica: HAScheduler) -> None:
    """The leader gauges and the log's ``epoch`` follow the replica's own view."""
    metrics.LEADER.set_function(lambda: 1.0 if leads(replica) else 0.0)
    metrics.LEADER_EPOCH.set_function(lambda: float(replica.status.epoch or 0))
    metrics.LEASE_LEFT.set_function(replica.election.remaining)
    set_process_fields(scheduler=replica.status.holder, epoch=lambda: replica.status.epoch)


def scheduler_health(replica: HAScheduler, store: Store, broker: Broker) -> Health:
    return Health(
        "scheduler",
        dependencies={"database": store.schema_revision, "broker": broker_check(broker)},
        describe=lambda: {"role": str(replica.status.role), "epoch": replica.status.epoch},
        last_pass=lambda: metrics.last_pass() if leads(replica) else None,
        monotonic=time.time,
    )
