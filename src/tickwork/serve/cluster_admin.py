"""Distributed mode: the API process and `tickwork db upgrade`."""

from __future__ import annotations

import asyncio
import functools
from datetime import timedelta
from pathlib import Path

import uvicorn

from tickwork.api.app import Role, create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.app.settings import Settings
from tickwork.app.status import StatusService
from tickwork.app.tokens import TokenService
from tickwork.coordination import open_leases
from tickwork.dashboard import end_streams_on_exit, with_dashboard
from tickwork.observe.facts import LEASE, FactsSource
from tickwork.observe.health import Health
from tickwork.ports import Lease, Store
from tickwork.serve.brokers import open_broker, open_cancels
from tickwork.serve.cluster import (
    guard_of,
    log,
    open_cluster_store,
    until_stopped,
    utcnow,
)
from tickwork.serve.observed import broker_check


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
    # `tickwork status` asks the API: the lease is read where the schedulers hold it.
    leases = open_leases(settings.coordination_url) if settings.coordination_url else None
    facts = FactsSource(store, utcnow, lease=leases.get_lease if leases else None)
    health = Health(
        "api", dependencies={"database": store.schema_revision, "broker": broker_check(broker)}
    )
    app = create_app(
        services,
        security=Security.over(services, idempotency_ttl=ttl),
        role=role,
        health=health,
        status=StatusService(store, facts),
    )
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
        if leases is not None:
            await leases.close()
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


async def _leader_live(settings: Settings, store: Store) -> bool:
    """Whether a scheduler holds the lease now (for "why isn't it running?")."""
    lease = await _leader(settings, store)
    return lease is not None and lease.expires_at > utcnow()


async def _leader(settings: Settings, store: Store) -> Lease | None:
    """The scheduler lease, from etcd or ZooKeeper when the cluster keeps it there."""
    if not settings.coordination_url:
        return await store.get_lease(LEASE)
    leases = open_leases(settings.coordination_url)
    try:
        return await leases.get_lease(LEASE)
    finally:
        await leases.close()
