"""Scheduler HA: replicas campaign for one lease, and only its holder schedules, fenced.

The leader renews its lease every ``ttl / 3``. It also keeps a deadline of its own on a
monotonic clock: ``ttl`` after it *sent* its last successful renewal, which is no later than
the expiry the database granted (the database computed that from a later instant). It is
fail-stop: when a renewal is refused, or the deadline passes before one succeeds (a slow or
cut-off database, a paused process), the scheduling task is cancelled at once and the
replica goes back to campaigning. And whatever a paused-then-resumed leader still manages
to send is refused by the database, because every write carries its token (``Fence``).

The lease may be held in etcd or ZooKeeper instead of the database (``leases``, see
``tickwork.coordination``). The database then checks tokens against its fence row, which
knows only the tokens it has seen: so a replica that takes such a lease checks its token
in with the store before it schedules, and from then on every write of an older leader is
refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import Protocol

from tickwork.hooks import Hooks
from tickwork.ports import Broker, Fence, Fenced, FenceStore, HistoryStore, Lease, LeaseStore
from tickwork.scheduler.history import HistoryConfig, maintain_history
from tickwork.scheduler.loop import (
    DEFAULT_WINDOW,
    Listen,
    Scheduler,
    SchedulerConfig,
    SchedulerStore,
)

log = logging.getLogger("tickwork.scheduler.ha")


class Role(StrEnum):
    STANDBY = "standby"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class HAConfig:
    lease: str = "scheduler"  # the lease's name: one per scheduler group
    ttl: float = 10.0  # seconds a lease lasts without a renewal
    renew_every: float | None = None  # seconds between renewals; None: ttl / 3
    campaign_every: float = 1.0  # seconds between a standby's attempts to take the lease

    def __post_init__(self) -> None:
        if not self.ttl > 0:
            raise ValueError(f"ttl must be a positive number of seconds, not {self.ttl!r}")
        if not 0 < self.renewal < self.ttl:
            raise ValueError(f"renew_every must be between 0 and ttl, not {self.renew_every!r}")
        if not self.campaign_every > 0:
            raise ValueError(f"campaign_every must be positive, not {self.campaign_every!r}")

    @property
    def renewal(self) -> float:
        return self.ttl / 3 if self.renew_every is None else self.renew_every


@dataclass(frozen=True, slots=True)
class LeaderStatus:
    """What a replica knows of its own role: ``epoch`` is the token of the lease it holds
    and ``expires_at`` the expiry the database granted it (both None for a standby)."""

    role: Role
    holder: str
    epoch: int | None = None
    expires_at: datetime | None = None


def holder_id() -> str:
    """A name for this replica that no other process (nor a restart of this one) shares."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


class LeaderElection:
    """One replica's hold on the lease: campaign, renew, and a local monotonic deadline."""

    def __init__(
        self,
        store: LeaseStore,
        holder: str,
        config: HAConfig | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        fences: FenceStore | None = None,
    ) -> None:
        self.config = config or HAConfig()
        self._store = store
        self._fences = fences  # where an external lease's token is checked in
        self._holder = holder
        self._monotonic = monotonic
        self._lease: Lease | None = None
        self._last: Lease | None = None  # the newest lease held, for resign()
        self._deadline = -math.inf

    @property
    def status(self) -> LeaderStatus:
        lease = self._lease if self.remaining() > 0 else None
        if lease is None:
            return LeaderStatus(Role.STANDBY, self._holder)
        return LeaderStatus(Role.LEADER, self._holder, lease.token, lease.expires_at)

    def remaining(self) -> float:
        """Seconds left before the local deadline (0 when not leader)."""
        return max(self._deadline - self._monotonic(), 0.0) if self._lease else 0.0

    def fence(self) -> Fence:
        """The fence every scheduler write carries; ``Fenced`` once the lease is not held."""
        lease = self._lease
        if lease is None or self.remaining() <= 0:
            raise Fenced(lease.fence if lease else Fence(self.config.lease, 0))
        return lease.fence

    async def campaign(self) -> bool:
        """Try to take (or keep) the lease; True if this replica now leads."""
        sent = self._monotonic()
        lease = await self._store.acquire_lease(self.config.lease, self._holder, self.config.ttl)
        if lease is not None and lease.external and lease.token != getattr(self._lease, "token", 0):
            lease = await self._check_in(lease)
        self._held(lease, sent)
        return lease is not None

    async def _check_in(self, lease: Lease) -> Lease | None:
        """Raise the store's fence row to a newly taken external lease's token; None (and
        the lease let go) if the store has seen a higher one."""
        if self._fences is None:
            raise ValueError(f"lease {lease.name!r} is external: LeaderElection needs fences")
        try:
            await self._fences.check_fence(lease.fence)
        except Fenced:
            log.error(
                "%s: the store has seen a token above %d for lease %r: a newer leader wrote, "
                "or etcd/ZooKeeper was rebuilt and its tokens started again (see "
                "docs/distributed.md); not leading",
                self._holder,
                lease.token,
                lease.name,
            )
            await self._store.release_lease(lease.name, lease.holder, lease.token)
            return None
        return lease

    async def renew(self) -> bool:
        """Renew before the deadline; False, and no longer leader, if refused or too late."""
        lease, sent = self._lease, self._monotonic()
        left = self._deadline - sent
        renewed = None
        if lease is not None and left > 0:
            ask = self._store.renew_lease(lease.name, lease.holder, lease.token, self.config.ttl)
            with contextlib.suppress(TimeoutError):
                renewed = await asyncio.wait_for(ask, left)
        self._held(renewed, sent)
        return renewed is not None

    def step_down(self) -> None:
        self._held(None, self._monotonic())

    async def resign(self) -> None:
        """Step down and let the lease expire now, so a standby takes over at once. (A no-op
        in the database if another holder has taken the lease since.)"""
        self.step_down()
        lease, self._last = self._last, None
        if lease is not None and not await self._store.release_lease(
            lease.name, lease.holder, lease.token
        ):
            log.info("%s: epoch %d was already over; nothing to release", self._holder, lease.token)

    def _held(self, lease: Lease | None, sent: float) -> None:
        old = self._lease
        if lease is None and old is not None:
            log.warning("%s: no longer leader (epoch %d)", self._holder, old.token)
        elif lease is not None and (old is None or old.token != lease.token):
            log.info("%s: leader with epoch %d", self._holder, lease.token)
        self._lease = lease
        self._last = lease or self._last
        self._deadline = sent + self.config.ttl if lease is not None else -math.inf


class HAScheduler:
    """Runs ``scheduler`` while, and only while, ``election`` holds the lease.

    ``scheduler`` must take its fences from ``election.fence`` (``ha_scheduler`` builds the
    pair). A crash of the scheduler other than ``Fenced`` propagates, after the scheduling
    task has been stopped.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        election: LeaderElection,
        housekeeping: Callable[[], Coroutine[None, None, None]] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.election = election
        #: Run while leading, cancelled with the leadership (partition maintenance).
        self.housekeeping = housekeeping

    @property
    def status(self) -> LeaderStatus:
        return self.election.status

    def wake(self) -> None:
        self.scheduler.wake()

    async def run(self) -> None:
        """Campaign; lead while holding the lease; campaign again after losing it. Runs
        until cancelled, and then lets the lease go so a standby takes over at once."""
        try:
            while True:
                if await self.election.campaign():
                    await self.lead()
                else:
                    await asyncio.sleep(self.election.config.campaign_every)
        finally:
            try:
                await self.election.resign()
            except Exception as exc:  # the database is gone too: the lease simply expires
                log.warning("could not release the lease (%s); it expires on its own", exc)

    async def lead(self) -> None:
        """Schedule until the lease is lost, then stop the scheduling task at once."""
        task = asyncio.create_task(self.scheduler.run(), name="scheduler.leader")
        # Not fenced, and safe so: see scheduler/history.py. It stops with the leadership.
        history = self._maintain()
        try:
            await self._keep_lease(task)
        finally:
            self.election.step_down()  # from here on, a write the task still tries is fenced
            task.cancel()
            if history is not None:
                history.cancel()
            # gather, not await: a second cancel of this coroutine must not be swallowed here.
            (ended, *_) = await asyncio.gather(
                task, *([history] if history else []), return_exceptions=True
            )
        if isinstance(ended, Exception) and not isinstance(ended, Fenced):
            raise ended  # the scheduler crashed: fail loudly

    def _maintain(self) -> asyncio.Task[None] | None:
        if self.housekeeping is None:
            return None
        return asyncio.create_task(self.housekeeping(), name="scheduler.history")

    async def _keep_lease(self, task: asyncio.Task[None]) -> None:
        """Renew every ``renewal`` seconds; return when the lease is lost or the task ends."""
        renewal = self.election.config.renewal
        while (left := self.election.remaining()) > 0:
            await asyncio.wait({task}, timeout=min(renewal, left))
            if task.done() or not await self.election.renew():
                return
        log.error("lease deadline passed before a renewal succeeded: stopping scheduling")


class LeaderStore(SchedulerStore, HistoryStore, LeaseStore, FenceStore, Protocol):
    """What a scheduler replica needs of the store: a scheduler's needs, history
    housekeeping, and (unless coordinated elsewhere) the lease and its fence."""


def ha_scheduler(
    store: LeaderStore,
    broker: Broker,
    *,
    holder: str,
    clock: Callable[[], datetime],
    rand: Callable[[], float],
    make_id: Callable[[], str],
    config: SchedulerConfig | None = None,
    ha: HAConfig | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    hooks: Hooks | None = None,
    history: HistoryConfig | None = None,
    leases: LeaseStore | None = None,
    listen: Listen | None = None,
) -> HAScheduler:
    """A scheduler replica: a ``Scheduler`` fenced by a ``LeaderElection`` on ``leases``
    (etcd, ZooKeeper), by default on ``store``'s own lease.

    ``config`` defaults to a sliding window of ``DEFAULT_WINDOW`` seconds. ``listen`` (the
    store's ``LISTEN`` for committed enqueues) runs only while this replica leads.
    """
    election = LeaderElection(leases or store, holder, ha, monotonic=monotonic, fences=store)
    scheduler = Scheduler(
        store,
        broker,
        clock=clock,
        rand=rand,
        make_id=make_id,
        config=config or SchedulerConfig(window=DEFAULT_WINDOW, reap_grace=15.0),
        fence=election.fence,
        hooks=hooks,
        listen=listen,
    )
    housekeeping = None if history is None else partial(maintain_history, store, clock, history)
    return HAScheduler(scheduler, election, housekeeping)
