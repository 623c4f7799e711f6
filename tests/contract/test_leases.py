"""Lease contract, on all three backends: the database's own lease, etcd and ZooKeeper.

What a scheduler replica relies on: one holder at a time, a token that only ever grows
across holders, renewals only by the holder with its token, release handing over at once,
and a token the store's fencing refuses once a newer holder has checked in. Each replica
(a "process") is its own lease store here: its own database connection, etcd client or
ZooKeeper session. A holder "ends" the way its process would: the database's and etcd's
leases expire unrenewed; a ZooKeeper session ends when its process does.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import pytest

from tests.coord_servers import PrivateEtcd, PrivateZooKeeper
from tests.helpers import eventually
from tickwork.coordination.etcd import EtcdLeases
from tickwork.coordination.zookeeper import ZooKeeperLeases
from tickwork.ports import Fence, Fenced, Lease, LeaseStore
from tickwork.scheduler.ha import HAConfig, LeaderElection, Role
from tickwork.store import SqlStore, open_store

NAME = "scheduler"
LONG = 30.0


class Replica(LeaseStore, Protocol):
    async def close(self) -> None: ...


@dataclass
class Backend:
    name: str
    open: Callable[[], Awaitable[Replica]]
    short: float  # a ttl that runs out within a test
    external: bool
    opened: list[Replica]

    async def replica(self) -> Replica:
        made = await self.open()
        self.opened.append(made)
        return made

    async def end(self, replica: Replica) -> None:
        """The replica's process is gone: its lease ends within ``short`` seconds."""
        if self.name == "zookeeper":
            self.opened.remove(replica)
            await replica.close()  # the session ends with the process


@pytest.fixture(params=["database", "etcd", "zookeeper"])
async def backend(request: pytest.FixtureRequest, sqlite_url: str) -> AsyncIterator[Backend]:
    async for made in _backend(request, sqlite_url):
        yield made


@pytest.fixture(params=["etcd", "zookeeper"])
async def external(request: pytest.FixtureRequest, sqlite_url: str) -> AsyncIterator[Backend]:
    async for made in _backend(request, sqlite_url):
        yield made


async def _backend(request: pytest.FixtureRequest, sqlite_url: str) -> AsyncIterator[Backend]:
    root = f"/t{os.urandom(4).hex()}"  # a key prefix / ZooKeeper root of this test's own
    if request.param == "database":

        async def opener() -> Replica:
            return await open_store(sqlite_url)

        made = Backend("database", opener, 0.2, False, [])
    elif request.param == "etcd":
        etcd: PrivateEtcd = request.getfixturevalue("etcd_server")

        async def opener() -> Replica:
            return EtcdLeases(etcd.url + root)

        made = Backend("etcd", opener, 1.0, True, [])  # etcd's TTLs are whole seconds
    else:
        zk: PrivateZooKeeper = request.getfixturevalue("zookeeper_server")

        async def opener() -> Replica:
            return ZooKeeperLeases(zk.url + root)

        made = Backend("zookeeper", opener, 1.0, True, [])
    yield made
    await asyncio.gather(*(replica.close() for replica in made.opened))


async def _taken_by(replica: Replica, holder: str, ttl: float = LONG) -> Lease:
    lease = await eventually(
        lambda: replica.acquire_lease(NAME, holder, ttl), lambda taken: taken is not None
    )
    assert lease is not None
    return lease


async def test_a_free_lease_is_taken_and_its_holder_just_renews(backend: Backend) -> None:
    one, two = await backend.replica(), await backend.replica()
    first = await one.acquire_lease(NAME, "a", LONG)
    assert first is not None
    assert (first.name, first.holder, first.external) == (NAME, "a", backend.external)
    assert first.fence.external is backend.external and first.token > 0

    again = await one.acquire_lease(NAME, "a", LONG)

    assert again is not None
    assert (again.holder, again.token, again.acquired_at) == ("a", first.token, first.acquired_at)
    assert await two.acquire_lease(NAME, "b", LONG) is None
    stored = await two.get_lease(NAME)
    assert stored is not None and (stored.holder, stored.token) == ("a", first.token)


async def test_renew_needs_the_holder_and_the_token_it_holds(backend: Backend) -> None:
    one = await backend.replica()
    lease = await one.acquire_lease(NAME, "a", LONG)
    assert lease is not None

    assert await one.renew_lease(NAME, "a", lease.token + 1, LONG) is None
    assert await one.renew_lease(NAME, "b", lease.token, LONG) is None
    assert await one.renew_lease("other", "a", lease.token, LONG) is None
    renewed = await one.renew_lease(NAME, "a", lease.token, LONG)

    assert renewed is not None
    assert (renewed.token, renewed.acquired_at) == (lease.token, lease.acquired_at)
    assert renewed.expires_at >= lease.expires_at


async def test_an_ended_holding_goes_to_the_next_holder_with_a_higher_token(
    backend: Backend,
) -> None:
    one, two = await backend.replica(), await backend.replica()
    old = await one.acquire_lease(NAME, "a", backend.short)
    assert old is not None
    await backend.end(one)

    new = await _taken_by(two, "b")

    assert new.holder == "b" and new.token > old.token
    assert await two.renew_lease(NAME, "a", old.token, LONG) is None
    assert await two.release_lease(NAME, "a", old.token) is False
    stored = await two.get_lease(NAME)
    assert stored is not None and (stored.holder, stored.token) == ("b", new.token)


async def test_release_hands_over_at_once_and_the_token_still_goes_up(backend: Backend) -> None:
    one, two = await backend.replica(), await backend.replica()
    lease = await one.acquire_lease(NAME, "a", LONG)
    assert lease is not None
    assert await one.release_lease(NAME, "a", lease.token + 1) is False
    assert await one.release_lease(NAME, "b", lease.token) is False
    assert await two.acquire_lease(NAME, "b", LONG) is None

    assert await one.release_lease(NAME, "a", lease.token) is True

    back = await one.acquire_lease(NAME, "a", LONG)  # its last holder: a new token too
    assert back is not None and back.token > lease.token
    assert await one.release_lease(NAME, "a", back.token) is True
    taken = await two.acquire_lease(NAME, "b", LONG)
    assert taken is not None and taken.holder == "b" and taken.token > back.token


async def test_replicas_racing_for_the_lease_get_it_exactly_once_each_round(
    backend: Backend,
) -> None:
    racers = [await backend.replica() for _ in range(4)]
    tokens: list[int] = []
    for round_ in range(4):
        won = await asyncio.gather(
            *(r.acquire_lease(NAME, f"r{round_}-{i}", LONG) for i, r in enumerate(racers))
        )
        winners = [(lease, r) for lease, r in zip(won, racers, strict=True) if lease is not None]
        assert len(winners) == 1, won
        (lease, holder), *_ = winners
        tokens.append(lease.token)
        assert await holder.release_lease(NAME, lease.holder, lease.token)
    assert tokens == sorted(set(tokens))


async def test_a_ttl_must_be_positive(backend: Backend) -> None:
    one = await backend.replica()
    for ttl in (0.0, -1.0):
        with pytest.raises(ValueError, match="ttl"):
            await one.acquire_lease(NAME, "a", ttl)


async def test_the_store_refuses_the_old_holders_fence_once_the_new_one_checked_in(
    backend: Backend, sqlite_url: str
) -> None:
    one, two = await backend.replica(), await backend.replica()
    store: SqlStore = await open_store(sqlite_url)
    try:
        old = await one.acquire_lease(NAME, "old", backend.short)
        assert old is not None
        await store.check_fence(old.fence)
        await backend.end(one)
        new = await _taken_by(two, "new")
        await store.check_fence(new.fence)  # what LeaderElection does on taking over

        with pytest.raises(Fenced) as refused:
            await store.mark_queued([("no-such-task-run", 1)], new.renewed_at, fence=old.fence)
        assert refused.value.fence == old.fence
        assert await store.mark_queued([], new.renewed_at, fence=new.fence) == []
    finally:
        await store.close()


async def test_a_replica_taking_an_external_lease_checks_its_token_in_first(
    external: Backend, sqlite_url: str
) -> None:
    backend = external
    store: SqlStore = await open_store(sqlite_url)
    try:
        election = LeaderElection(await backend.replica(), "a", HAConfig(ttl=LONG), fences=store)
        assert await election.campaign()
        token = election.fence().token
        # The store knows the new token before the new leader has written anything.
        with pytest.raises(Fenced):
            await store.check_fence(Fence(NAME, token - 1, external=True))

        # A store that has seen a higher token (etcd rebuilt, say): the replica does not
        # lead, and lets the lease go for another replica.
        await election.resign()
        await store.check_fence(Fence(NAME, token + 10**6, external=True))
        assert not await election.campaign()
        assert election.status.role == Role.STANDBY
        assert await (await backend.replica()).get_lease(NAME) is None
    finally:
        await store.close()
