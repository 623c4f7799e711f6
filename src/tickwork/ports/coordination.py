"""Pools, the worker registry and the scheduler lease with its fence."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tickwork.core.errors import TickworkError
from tickwork.core.model import (
    Pool,
)
from tickwork.ports.records import PoolUsage, WorkerInfo


class PoolStore(Protocol):
    """Pools: named slot limits that tasks declare (``pool``, ``pool_slots``)."""

    async def set_pool(self, pool: Pool, now: datetime) -> bool:
        """Create the pool or change its slots and description; True if it was created.
        Shrinking below the slots in use takes no slot back: no new task enters until the
        pool has room again."""

    async def delete_pool(self, name: str) -> bool:
        """Delete a pool; False if there is none. Task runs that declare it then wait until
        a pool of that name exists again."""

    async def list_pools(self) -> list[PoolUsage]:
        """Every pool, by name, with its slots in use."""

    async def get_pool(self, name: str) -> PoolUsage | None: ...


class WorkerRegistry(Protocol):
    """Worker processes, for ``tickwork status``. Decides nothing (the reaper goes by each
    task run's own heartbeat)."""

    async def register_worker(self, worker: WorkerInfo) -> None:
        """Insert the worker (replacing a registration with its id)."""

    async def worker_heartbeat(
        self, worker_id: str, now: datetime, running: int, stopped: bool = False
    ) -> None:
        """Record that the worker is alive with ``running`` task runs (``stopped``: it is
        shutting down cleanly)."""

    async def list_workers(self, seen_since: datetime | None = None) -> list[WorkerInfo]:
        """Registered workers by id, optionally only those heard from since an instant."""

    async def forget_workers(self, seen_before: datetime) -> int:
        """Delete registrations not heard from since ``seen_before``; returns how many."""


@dataclass(frozen=True, slots=True)
class Fence:
    """A leader's proof of leadership, carried by its writes: a lease and the token it holds.

    A store checks it in the write's own transaction and refuses the whole write
    (``Fenced``) unless the lease still has this token and has not expired.

    ``external``: the lease is held outside the database (etcd, ZooKeeper), so the store
    cannot see it. It checks the token against the fence row of the lease's name instead:
    the highest token any write has carried. A write with a higher token raises the row to
    it, one with a lower token is refused (the textbook storage-side fencing check).
    """

    lease: str
    token: int
    external: bool = False


class Fenced(TickworkError):
    """A fenced write was refused: its token no longer holds the lease (another holder took
    it, or it expired). Nothing was written; the writer must stop acting as leader at once."""

    def __init__(self, fence: Fence) -> None:
        super().__init__(f"lease {fence.lease!r} is no longer held with token {fence.token}")
        self.fence = fence


@dataclass(frozen=True, slots=True)
class Lease:
    """A named lease as stored. ``token`` (the epoch) only ever increases: every new holder,
    and a holder taking back its own expired lease, gets a higher one."""

    name: str
    holder: str
    token: int
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    external: bool = False  # held in etcd or ZooKeeper: see ``Fence.external``

    @property
    def fence(self) -> Fence:
        return Fence(self.name, self.token, self.external)


class LeaseStore(Protocol):
    """Named leases with fencing tokens (scheduler leadership).

    Expiry is judged on the database's clock where it has one (PostgreSQL), so the clocks of
    the processes competing do not matter; SQLite, which lives on one machine, uses that
    machine's clock. ``ttl`` is in seconds. A lease row is never deleted, so its token keeps
    increasing across holders, expiries and releases.
    """

    async def acquire_lease(self, name: str, holder: str, ttl: float) -> Lease | None:
        """Take the lease if it is free or expired (the token goes up by one), or renew it if
        ``holder`` still holds it (same token). None if another holder holds it. Atomic: of
        holders racing for a free lease, exactly one gets it."""

    async def renew_lease(self, name: str, holder: str, token: int, ttl: float) -> Lease | None:
        """Extend the lease to ``ttl`` from now, only if ``holder`` still holds it with
        ``token`` and it has not expired; else None (the holder has lost it)."""

    async def release_lease(self, name: str, holder: str, token: int) -> bool:
        """Let the lease expire now, if ``holder`` holds it with ``token``, so a standby can
        take it at once. False if it was not held so."""

    async def get_lease(self, name: str) -> Lease | None:
        """The lease as stored (maybe expired); None if it was never taken."""


class FenceStore(Protocol):
    """The storage side of fencing, on its own."""

    async def check_fence(self, fence: Fence) -> None:
        """The fence check of a write, in a transaction of its own and writing nothing else:
        ``Fenced`` if it is refused. For an ``external`` fence this records its token as the
        highest seen, so a new leader calls it as soon as it takes over: from then on a
        write of any older leader is refused, even before the new one has written."""
