"""Distributed mode: the API process, `tickwork db upgrade` and `tickwork status`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import uvicorn

from tickwork.api.app import Role, create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.app.settings import Settings
from tickwork.app.tokens import TokenService
from tickwork.coordination import open_leases
from tickwork.core.errors import TickworkError
from tickwork.dashboard import end_streams_on_exit, with_dashboard
from tickwork.ports import Broker, Lease, WorkerInfo
from tickwork.serve.brokers import open_broker, open_cancels
from tickwork.serve.cluster import guard_of, log, open_cluster_store, until_stopped, utcnow
from tickwork.store import SqlStore

LEASE = "scheduler"
#: A worker silent this long shows as lost in ``status``; one silent a day is forgotten.
WORKER_LOST_AFTER = timedelta(seconds=15)
WORKER_FORGET_AFTER = timedelta(days=1)


async def serve_api(settings: Settings, role: Role, stop: asyncio.Event) -> None:
    """The HTTP API over PostgreSQL; `now` runs and cancels go straight to Redis."""
    store = await open_cluster_store(settings)
    broker = open_broker(settings)
    cancels = open_cancels(settings)
    # No wake: the leader polls every second and hands work to Redis ahead of time.
    services = Services(
        store,
        broker,
        clock=utcnow,
        url_guard=guard_of(settings).check,
        cancels=cancels,
        leader=functools.partial(_leader_live, settings, store),
    )
    ttl = timedelta(seconds=settings.idempotency_ttl)
    app = create_app(services, security=Security.over(services, idempotency_ttl=ttl), role=role)
    with_dashboard(app, services, writable=role != "read")
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    log.info(
        "tickwork API (%s) is up: http://%s:%d (dashboard: http://%s:%d/)",
        role, settings.host, settings.port, settings.host, settings.port,
    )  # fmt: skip
    work = asyncio.create_task(server.serve(), name="api")
    streams = asyncio.create_task(end_streams_on_exit(app, lambda: server.should_exit))
    try:
        await until_stopped(stop, work)
    finally:
        server.should_exit = True
        await asyncio.gather(streams, return_exceptions=True)
        await asyncio.gather(work, return_exceptions=True)
        await cancels.close()
        await broker.close()
        await store.close()


async def upgrade_database(settings: Settings) -> Path | None:
    """Migrate to the newest schema; on a database without tokens, create the first admin
    token in ``data_dir/admin.token`` (0600) and return its path."""
    store = await open_cluster_store(settings)
    try:
        await store.migrate()
        return await TokenService(store, utcnow).bootstrap(settings.data_dir)
    finally:
        await store.close()


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    leader: Lease | None
    leader_live: bool
    workers: list[WorkerInfo]
    lost: frozenset[str]  # ids of workers silent longer than WORKER_LOST_AFTER
    depths: dict[str, int] | None  # None: Redis did not answer
    broker_error: str | None = None


async def cluster_status(settings: Settings) -> ClusterStatus:
    store = await open_cluster_store(settings)
    broker = open_broker(settings)
    try:
        now = utcnow()
        lease = await _leader(settings, store)
        await store.forget_workers(now - WORKER_FORGET_AFTER)
        workers = [w for w in await store.list_workers() if w.stopped_at is None]
        lost = frozenset(w.id for w in workers if now - w.heartbeat_at > WORKER_LOST_AFTER)
        depths, error = await _depths(broker)
        live = lease is not None and lease.expires_at > now
        return ClusterStatus(lease, live, workers, lost, depths, error)
    finally:
        with contextlib.suppress(Exception):
            await broker.close()
        await store.close()


async def _leader_live(settings: Settings, store: SqlStore) -> bool:
    """Whether a scheduler holds the lease now (for "why isn't it running?")."""
    lease = await _leader(settings, store)
    return lease is not None and lease.expires_at > utcnow()


async def _leader(settings: Settings, store: SqlStore) -> Lease | None:
    """The scheduler lease, from etcd or ZooKeeper when the cluster keeps it there."""
    if not settings.coordination_url:
        return await store.get_lease(LEASE)
    leases = open_leases(settings.coordination_url)
    try:
        return await leases.get_lease(LEASE)
    finally:
        await leases.close()


async def _depths(broker: Broker) -> tuple[dict[str, int] | None, str | None]:
    try:
        return await broker.depths(), None
    except TickworkError as exc:
        return None, str(exc)
