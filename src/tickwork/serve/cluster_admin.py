"""Distributed mode's pieces beside the processes: `tickwork db upgrade`, and where the
scheduler lease is read (PostgreSQL, or etcd / ZooKeeper with ``coordination_url``)."""

from __future__ import annotations

from pathlib import Path

from tickwork.app.settings import Settings
from tickwork.app.tokens import TokenService
from tickwork.coordination import open_leases
from tickwork.observe.facts import LEASE
from tickwork.ports import Lease, Store
from tickwork.serve.observed import utcnow
from tickwork.store import open_store


async def upgrade_database(settings: Settings) -> Path | None:
    """Migrate to the newest schema; on a database without tokens, create the first admin
    token in ``data_dir/admin.token`` (0600) and return its path."""
    store = await open_store(settings.require_database())
    try:
        await store.migrate()
        return await TokenService(store, utcnow).bootstrap(settings.data_dir)
    finally:
        await store.close()


async def leader_live(settings: Settings, store: Store) -> bool:
    """Whether a scheduler holds the lease now (for "why isn't it running?")."""
    lease = await leader(settings, store)
    return lease is not None and lease.expires_at > utcnow()


async def leader(settings: Settings, store: Store) -> Lease | None:
    """The scheduler lease, from etcd or ZooKeeper when the cluster keeps it there."""
    if not settings.coordination_url:
        return await store.get_lease(LEASE)
    leases = open_leases(settings.coordination_url)
    try:
        return await leases.get_lease(LEASE)
    finally:
        await leases.close()
