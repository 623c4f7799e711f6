"""Distributed mode: scheduler, worker and API processes over PostgreSQL and Redis.

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
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from tickwork.app.settings import WORKER_GRACE, Settings
from tickwork.coordination import open_leases
from tickwork.core.errors import StoreUnavailable
from tickwork.hooks import CallbackErrorLog, Hooks
from tickwork.ids import new_id
from tickwork.observe import metrics
from tickwork.observe.facts import FactsSource
from tickwork.observe.health import Health
from tickwork.observe.http import MetricsEndpoint
from tickwork.observe.logs import configure_logging, set_process_fields
from tickwork.observe.runner import observed_runners
from tickwork.observe.store import observed_broker, observed_store
from tickwork.ports import Broker, LeaseStore, Store
from tickwork.runtime.retry import through_outages
from tickwork.scheduler.ha import HAConfig, HAScheduler, Role, ha_scheduler, holder_id
from tickwork.scheduler.history import HistoryConfig
from tickwork.scheduler.loop import SchedulerConfig
from tickwork.security.ssrf import UrlGuard, parse_allow
from tickwork.serve.brokers import open_broker, open_cancels
from tickwork.serve.embedded import BadSetting, runner_guard
from tickwork.serve.observed import (
    broker_check,
    job_label,
    probe_server,
    process_info,
    registry_beats,
    stop_registration,
    track_slots,
    warn_unserved,
)
from tickwork.serve.tuning import tune_gc
from tickwork.store import SqlStore, open_store
from tickwork.worker import capture
from tickwork.worker.pool import PoolConfig, WorkerPool
from tickwork.worker.runners import build_runners, close_runners

log = logging.getLogger("tickwork")

RESTART_DELAY = 1.0  # seconds a scheduler replica waits after a crash before campaigning


def utcnow() -> datetime:
    return datetime.now(UTC)


async def open_cluster_store(settings: Settings) -> SqlStore:
    return await open_store(settings.require_database())


def guard_of(settings: Settings) -> UrlGuard:
    try:
        return UrlGuard(parse_allow(settings.http_allow))
    except ValueError as exc:
        raise BadSetting(str(exc)) from None


def run_process(main: Callable[[asyncio.Event], Awaitable[None]], log_format: str = "text") -> None:
    """Run ``main(stop)`` until it returns; SIGTERM and SIGINT set ``stop``."""
    configure_logging(log_format)
    tune_gc()

    async def with_signals() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(with_signals())


async def with_probes(
    settings: Settings, health: Health, endpoint: MetricsEndpoint, stop: asyncio.Event
) -> asyncio.Task[None] | None:
    """Serve ``--metrics-port`` (if set) until ``stop``; the task to await at shutdown."""
    if not settings.metrics_port:
        return None
    server = probe_server(settings.metrics_host, settings.metrics_port, health, endpoint)

    async def serve() -> None:
        serving = asyncio.create_task(server.serve(), name="probes")
        await stop.wait()
        server.should_exit = True
        await serving

    where = f"http://{settings.metrics_host}:{settings.metrics_port}"
    log.info("metrics and probes: %s/metrics, /livez, /readyz", where)
    return asyncio.create_task(serve(), name="probes")


async def until_stopped(stop: asyncio.Event, work: asyncio.Task[None]) -> None:
    """Wait for ``stop`` or for ``work`` to end (its exception propagates)."""
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({stopper, work}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if work.done():
        work.result()


# -- scheduler ---------------------------------------------------------------------------------


def scheduler_replica(
    settings: Settings,
    store: Store,
    broker: Broker,
    hooks: Hooks,
    leases: LeaseStore | None = None,
) -> HAScheduler:
    config = SchedulerConfig(
        window=settings.window,
        heartbeat_timeout=settings.heartbeat_timeout,
        reap_grace=settings.heartbeat_timeout,
    )
    return ha_scheduler(
        store,
        broker,
        holder=holder_id(),
        clock=utcnow,
        rand=random.random,
        make_id=new_id,
        config=config,
        ha=HAConfig(ttl=settings.lease_ttl),
        hooks=hooks,
        leases=leases,
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


async def serve_scheduler(settings: Settings, stop: asyncio.Event) -> None:
    store = observed_store(await open_cluster_store(settings), job_label=job_label())
    broker = observed_broker(open_broker(settings))
    callback_errors = CallbackErrorLog(store, utcnow)
    hooks = Hooks(url_guard=runner_guard(guard_of(settings)), on_error=callback_errors)
    leases = open_leases(settings.coordination_url) if settings.coordination_url else None
    replica = scheduler_replica(settings, store, broker, hooks, leases)
    holder = replica.status.holder
    log.info(
        "scheduler replica %s campaigning (lease TTL %.0f s, in %s)",
        holder,
        settings.lease_ttl,
        settings.coordination_url.split("://")[0] if leases else "PostgreSQL",
    )
    track_leadership(replica)
    await through_outages(
        "register", lambda: store.register_worker(process_info(holder, "scheduler"))
    )
    facts = FactsSource(store, utcnow, lease=leases.get_lease if leases else None)
    health = scheduler_health(replica, store, broker)
    work = asyncio.create_task(keep_campaigning(replica), name="scheduler")
    side = [
        asyncio.create_task(
            registry_beats(store, holder, lambda: int(leads(replica))), name="registry"
        ),
        asyncio.create_task(warn_unserved(facts, lambda: leads(replica)), name="unserved-queues"),
    ]
    health.loops.extend([work, *side])
    probes = await with_probes(
        settings, health, MetricsEndpoint(facts, lambda: leads(replica)), stop
    )
    try:
        await until_stopped(stop, work)
    finally:
        work.cancel()
        for task in side:
            task.cancel()
        await asyncio.gather(work, *side, return_exceptions=True)  # resigns the lease
        await stop_registration(store, holder)
        if probes is not None:
            stop.set()
            await asyncio.gather(probes, return_exceptions=True)
        await hooks.close(5.0)
        await callback_errors.flush(5.0)
        await broker.close()
        if leases is not None:
            await leases.close()
        await store.close()


# -- worker ------------------------------------------------------------------------------------


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


async def serve_worker(settings: Settings, stop: asyncio.Event) -> None:
    wid = worker_id()
    set_process_fields(worker=wid)
    queues = settings.queues_for(("default",))
    store = observed_store(await open_cluster_store(settings), job_label=job_label())
    broker = observed_broker(open_broker(settings, consumer=wid))
    cancels = open_cancels(settings)
    guard = runner_guard(guard_of(settings))
    runners = build_runners(http_guard=guard)
    callback_errors = CallbackErrorLog(store, utcnow)
    hooks = Hooks(url_guard=guard, on_error=callback_errors)
    config = PoolConfig(worker_id=wid, queues=queues, concurrency=settings.concurrency)
    pool = WorkerPool(
        store,
        broker,
        observed_runners(runners),
        config,
        clock=utcnow,
        rand=random.random,
        hooks=hooks,
        cancels=cancels,
    )
    capture.install()
    info = process_info(wid, "worker", queues, settings.concurrency)
    await through_outages("register", lambda: store.register_worker(info))
    log.info("worker %s taking %s (%d at once)", wid, ",".join(queues), settings.concurrency)
    track_slots(pool, settings.concurrency)
    work = asyncio.create_task(pool.run(), name="worker-pool")
    beats = asyncio.create_task(
        registry_beats(store, wid, lambda: pool.active_count), name="worker-registry"
    )
    health = Health(
        "worker",
        loops=[work, beats],
        dependencies={"database": store.schema_revision, "broker": broker_check(broker)},
        describe=lambda: {"worker": wid, "running": pool.active_count},
    )
    probes = await with_probes(settings, health, MetricsEndpoint(), stop)
    try:
        await until_stopped(stop, work)
    finally:
        await pool.drain(settings.grace_for(WORKER_GRACE))
        for task in (work, beats):
            task.cancel()
        await asyncio.gather(work, beats, return_exceptions=True)
        await stop_registration(store, wid)
        if probes is not None:
            stop.set()
            await asyncio.gather(probes, return_exceptions=True)
        await hooks.close(5.0)
        await callback_errors.flush(5.0)
        await close_runners(runners)
        capture.uninstall()
        await cancels.close()
        await broker.close()
        await store.close()
