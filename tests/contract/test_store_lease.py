"""Store contract: named leases with a fencing token that only ever increases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from tests.helpers import FakeClock, eventually, utc
from tickwork.ports import Lease
from tickwork.store import SqlStore, open_store

NAME = "scheduler"
LONG = 30.0  # seconds: a lease that cannot expire during a test
SHORT = 0.2  # seconds: one that expires after a short poll


@pytest.fixture
async def rivals(store_url: str, store: SqlStore) -> AsyncIterator[list[SqlStore]]:
    """Three more stores on the test's database: other scheduler processes."""
    opened = [await open_store(store_url) for _ in range(3)]
    yield opened
    for s in opened:
        await s.close()


async def _taken_by(store: SqlStore, holder: str, ttl: float = LONG) -> Lease:
    """Poll until ``holder`` gets the lease (the current one has to expire first)."""
    lease = await eventually(
        lambda: store.acquire_lease(NAME, holder, ttl), lambda taken: taken is not None
    )
    assert lease is not None
    return lease


async def test_free_lease_is_taken_with_token_one_and_its_holder_just_renews(
    store: SqlStore,
) -> None:
    first = await store.acquire_lease(NAME, "a", LONG)
    assert first is not None
    assert (first.name, first.holder, first.token) == (NAME, "a", 1)
    span = first.expires_at - first.renewed_at
    assert span == pytest.approx(timedelta(seconds=LONG), abs=timedelta(seconds=1))

    again = await store.acquire_lease(NAME, "a", LONG)

    assert again is not None
    assert (again.holder, again.token, again.acquired_at) == ("a", 1, first.acquired_at)
    assert again.expires_at >= first.expires_at
    assert await store.acquire_lease(NAME, "b", LONG) is None
    assert await store.get_lease(NAME) == again


async def test_renew_needs_the_holder_and_the_token_it_holds(store: SqlStore) -> None:
    lease = await store.acquire_lease(NAME, "a", LONG)
    assert lease is not None

    assert await store.renew_lease(NAME, "a", lease.token + 1, LONG) is None
    assert await store.renew_lease(NAME, "b", lease.token, LONG) is None
    assert await store.renew_lease("other", "a", lease.token, LONG) is None
    renewed = await store.renew_lease(NAME, "a", lease.token, 2 * LONG)

    assert renewed is not None
    assert (renewed.token, renewed.acquired_at) == (lease.token, lease.acquired_at)
    assert renewed.expires_at > lease.expires_at + timedelta(seconds=LONG / 2)


async def test_an_expired_lease_goes_to_the_next_holder_with_a_higher_token(
    store: SqlStore,
) -> None:
    old = await store.acquire_lease(NAME, "a", SHORT)
    assert old is not None

    new = await _taken_by(store, "b")

    assert (new.holder, new.token) == ("b", old.token + 1)
    # The old holder has lost it for good: no renewal, no release, no fence.
    assert await store.renew_lease(NAME, "a", old.token, LONG) is None
    assert await store.release_lease(NAME, "a", old.token) is False
    assert await store.acquire_lease(NAME, "a", LONG) is None
    assert await store.get_lease(NAME) == new


async def test_release_frees_the_lease_at_once_and_the_token_still_goes_up(
    store: SqlStore,
) -> None:
    lease = await store.acquire_lease(NAME, "a", LONG)
    assert lease is not None
    assert await store.release_lease(NAME, "a", lease.token + 1) is False
    assert await store.release_lease(NAME, "b", lease.token) is False
    assert await store.acquire_lease(NAME, "b", LONG) is None

    assert await store.release_lease(NAME, "a", lease.token) is True

    # Released is expired: even its last holder comes back under a new epoch.
    back = await store.acquire_lease(NAME, "a", LONG)
    assert back is not None and back.token == 2
    assert await store.release_lease(NAME, "a", back.token) is True
    taken = await store.acquire_lease(NAME, "b", LONG)
    assert taken is not None and (taken.holder, taken.token) == ("b", 3)


async def test_holders_racing_for_the_lease_get_it_exactly_once_each_round(
    store: SqlStore, rivals: list[SqlStore]
) -> None:
    racers = [store, *rivals]
    tokens: list[int] = []
    for round_ in range(8):  # the first round races to insert the row, the others to update
        won = await asyncio.gather(
            *(s.acquire_lease(NAME, f"r{round_}-{i}", LONG) for i, s in enumerate(racers))
        )
        winners = [lease for lease in won if lease is not None]
        assert len(winners) == 1, won
        tokens.append(winners[0].token)
        assert await store.release_lease(NAME, winners[0].holder, winners[0].token)
    assert tokens == list(range(1, 9))


async def test_tokens_only_increase_across_expiries_and_takeovers(
    store: SqlStore, rivals: list[SqlStore]
) -> None:
    seen = []
    for i in range(4):
        lease = await _taken_by(rivals[i % 3], f"h{i % 2}", SHORT)
        seen.append(lease.token)
    assert seen == [1, 2, 3, 4]
    stored = await store.get_lease(NAME)
    assert stored is not None and stored.token == 4


async def test_unknown_lease_is_none_and_a_ttl_must_be_positive(store: SqlStore) -> None:
    assert await store.get_lease("never") is None
    for ttl in (0.0, -1.0):
        with pytest.raises(ValueError, match="ttl"):
            await store.acquire_lease(NAME, "a", ttl)
    assert await store.get_lease(NAME) is None


async def test_sqlite_judges_expiry_by_the_store_clock(sqlite_url: str) -> None:
    clock = FakeClock(utc(2026, 3, 2, 10, 0))
    a, b = await open_store(sqlite_url, clock=clock), await open_store(sqlite_url, clock=clock)
    try:
        first = await a.acquire_lease(NAME, "a", 10.0)
        assert first is not None and first.expires_at == clock.now + timedelta(seconds=10)
        clock.now += timedelta(seconds=9.999)
        assert await b.acquire_lease(NAME, "b", 10.0) is None
        clock.now += timedelta(milliseconds=1)  # expires_at itself: expired
        taken = await b.acquire_lease(NAME, "b", 10.0)
        assert taken is not None and taken.token == 2
        assert await a.renew_lease(NAME, "a", first.token, 10.0) is None
    finally:
        await a.close()
        await b.close()


@pytest.mark.postgres
async def test_postgres_judges_expiry_by_its_own_clock_not_the_callers(pg_url: str) -> None:
    ahead = FakeClock(utc(2099, 1, 1))  # a scheduler whose clock is 70 years fast
    fast, store = await open_store(pg_url, clock=ahead), await open_store(pg_url)
    try:
        await store.truncate_all()
        lease = await store.acquire_lease(NAME, "a", LONG)
        assert lease is not None and lease.expires_at.year < 2099
        assert await fast.acquire_lease(NAME, "fast", LONG) is None
        assert await fast.renew_lease(NAME, "a", lease.token, LONG) is not None
    finally:
        await fast.close()
        await store.close()
