"""Distributed mode: scheduler, worker and API processes over PostgreSQL and Redis.

Each process is stateless: PostgreSQL is the record, Redis carries task-run keys. Any number
of each may run on any number of machines; schedulers elect one leader among themselves.
SIGTERM or SIGINT stops a process cleanly (a worker first lets running tasks finish within
its grace period); SIGKILL loses nothing either (the reaper and the reconciler recover).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from tickwork.app.settings import WORKER_GRACE, Settings
from tickwork.coordination import open_leases
from tickwork.core.errors import StoreUnavailable
from tickwork.hooks import CallbackErrorLog, Hooks
from tickwork.ids import new_id
from tickwork.ports import Broker, LeaseStore, WorkerInfo
from tickwork.runtime.retry import through_outages
from tickwork.scheduler.ha import HAConfig, HAScheduler, ha_scheduler, holder_id
from tickwork.scheduler.history import HistoryConfig
from tickwork.scheduler.loop import SchedulerConfig
from tickwork.security.ssrf import UrlGuard, parse_allow
from tickwork.serve.brokers import open_broker, open_cancels
from tickwork.serve.embedded import BadSetting, runner_guard
from tickwork.serve.tuning import tune_gc
from tickwork.store import SqlStore, open_store
from tickwork.worker import capture
from tickwork.worker.pool import PoolConfig, WorkerPool
from tickwork.worker.runners import build_runners, close_runners

log = logging.getLogger("tickwork")

REGISTRY_EVERY = 2.0  # seconds between a worker's registry heartbeats
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


def run_process(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop)`` until it returns; SIGTERM and SIGINT set ``stop``."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    tune_gc()

    async def with_signals() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(with_signals())


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
    store: SqlStore,
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


async def serve_scheduler(settings: Settings, stop: asyncio.Event) -> None:
    store = await open_cluster_store(settings)
    broker = open_broker(settings)
    callback_errors = CallbackErrorLog(store, utcnow)
    hooks = Hooks(url_guard=runner_guard(guard_of(settings)), on_error=callback_errors)
    leases = open_leases(settings.coordination_url) if settings.coordination_url else None
    replica = scheduler_replica(settings, store, broker, hooks, leases)
    log.info(
        "scheduler replica %s campaigning (lease TTL %.0f s, in %s)",
        replica.status.holder,
        settings.lease_ttl,
        settings.coordination_url.split("://")[0] if leases else "PostgreSQL",
    )
    work = asyncio.create_task(keep_campaigning(replica), name="scheduler")
    try:
        await until_stopped(stop, work)
    finally:
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)  # resigns the lease
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
    store = await open_cluster_store(settings)
    broker = open_broker(settings, consumer=wid)
    cancels = open_cancels(settings)
    guard = runner_guard(guard_of(settings))
    runners = build_runners(http_guard=guard)
    callback_errors = CallbackErrorLog(store, utcnow)
    hooks = Hooks(url_guard=guard, on_error=callback_errors)
    config = PoolConfig(worker_id=wid, queues=settings.queues, concurrency=settings.concurrency)
    pool = WorkerPool(
        store,
        broker,
        runners,
        config,
        clock=utcnow,
        rand=random.random,
        hooks=hooks,
        cancels=cancels,
    )
    capture.install()
    await through_outages("register", lambda: store.register_worker(_info(wid, settings)))
    log.info(
        "worker %s taking %s (%d at once)", wid, ",".join(settings.queues), settings.concurrency
    )
    work = asyncio.create_task(pool.run(), name="worker-pool")
    beats = asyncio.create_task(_registry_beats(store, wid, pool), name="worker-registry")
    try:
        await until_stopped(stop, work)
    finally:
        await pool.drain(settings.grace_for(WORKER_GRACE))
        for task in (work, beats):
            task.cancel()
        await asyncio.gather(work, beats, return_exceptions=True)
        with contextlib.suppress(StoreUnavailable):
            await store.worker_heartbeat(wid, utcnow(), 0, stopped=True)
        await hooks.close(5.0)
        await callback_errors.flush(5.0)
        await close_runners(runners)
        capture.uninstall()
        await cancels.close()
        await broker.close()
        await store.close()


def _info(wid: str, settings: Settings) -> WorkerInfo:
    now = utcnow()
    return WorkerInfo(
        id=wid,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        queues=settings.queues,
        concurrency=settings.concurrency,
        started_at=now,
        heartbeat_at=now,
    )


async def _registry_beats(store: SqlStore, wid: str, pool: WorkerPool) -> None:
    while True:
        await asyncio.sleep(REGISTRY_EVERY)
        with contextlib.suppress(StoreUnavailable):
            await store.worker_heartbeat(wid, utcnow(), pool.active_count)
