"""Idempotency keys recorded by the writes they guard (SQLite and PostgreSQL).

The concurrency tests write through several stores opened on one database, as separate API
processes would: each has its own connections, so the database alone decides who wins.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from tests.contract.factory import T0, at, make_job, make_run
from tickwork.core.errors import Conflict
from tickwork.core.model import Job
from tickwork.ports import IdempotencyRecord, KeyReceipt, KeyTaken
from tickwork.store import SqlStore, open_store

TTL = timedelta(hours=1)


def _receipt(
    body: str = "{}",
    *,
    request_hash: str = "h",
    key: str = "k",
    token: str = "t",
    now: datetime = T0,
) -> KeyReceipt:
    return KeyReceipt(token, key, request_hash, 201, body, now, now + TTL)


async def _job(store: SqlStore) -> Job:
    job = make_job("job")
    await store.create_jobs([(job, [])])
    return job


@pytest.fixture
async def stores(store_url: str, store: SqlStore) -> AsyncIterator[list[SqlStore]]:
    """The test's store and three more on its database (the same, emptied, tables)."""
    others = [await open_store(store_url) for _ in range(3)]
    yield [store, *others]
    for other in others:
        await other.close()


async def test_a_write_records_its_key_with_its_response(store: SqlStore) -> None:
    assert await store.get_key("t", "k", T0) is None
    await store.create_jobs([(make_job("a"), [])], _receipt('{"name":"a"}'))
    assert await store.get_key("t", "k", T0) == IdempotencyRecord("h", 201, '{"name":"a"}')
    job = await store.get_job("a")
    assert job is not None
    await store.create_runs([make_run(job)], _receipt("run", key="k2"))
    assert await store.get_key("t", "k2", T0) == IdempotencyRecord("h", 201, "run")


async def test_a_write_that_fails_records_no_key(store: SqlStore) -> None:
    job = await _job(store)
    with pytest.raises(Conflict):
        await store.create_jobs([(make_job("job"), [])], _receipt())
    await store.create_runs([make_run(job, T0)])
    with pytest.raises(Conflict):
        await store.create_runs([make_run(job, T0)], _receipt())
    assert await store.get_key("t", "k", T0) is None
    # The key is free: the next write with it goes through and keeps it.
    await store.create_runs([make_run(job, at(60))], _receipt("second"))
    assert await store.get_key("t", "k", T0) == IdempotencyRecord("h", 201, "second")


async def test_a_write_whose_key_is_held_raises_key_taken_and_writes_nothing(
    store: SqlStore,
) -> None:
    job = await _job(store)
    first, second = make_run(job, T0), make_run(job, at(60))
    await store.create_runs([first], _receipt("first"))
    with pytest.raises(KeyTaken) as taken:
        await store.create_runs([second], _receipt("second", request_hash="other"))
    assert taken.value.held == IdempotencyRecord("h", 201, "first")
    assert await store.get_run(second.run.id) is None
    with pytest.raises(KeyTaken):
        await store.create_jobs([(make_job("b"), [])], _receipt())
    assert await store.get_job("b") is None


async def test_keys_are_per_token(store: SqlStore) -> None:
    await store.create_jobs([(make_job("a"), [])], _receipt("a", token="t1"))
    await store.create_jobs([(make_job("b"), [])], _receipt("b", token="t2"))
    assert (await store.get_key("t1", "k", T0), await store.get_key("t2", "k", T0)) == (
        IdempotencyRecord("h", 201, "a"),
        IdempotencyRecord("h", 201, "b"),
    )


async def test_an_expired_key_is_free_again_and_purged(store: SqlStore) -> None:
    await store.create_jobs([(make_job("a"), [])], _receipt("a"))
    await store.create_jobs([(make_job("old"), [])], _receipt("old", key="old"))
    later = T0 + TTL
    assert await store.get_key("t", "k", later) is None
    await store.create_jobs([(make_job("b"), [])], _receipt("b", request_hash="h2", now=later))
    assert await store.get_key("t", "k", later) == IdempotencyRecord("h2", 201, "b")
    assert await store.purge_keys(later) == 1  # "old"; "k" was replaced already
    assert await store.purge_keys(later) == 0


async def test_concurrent_runs_with_one_key_commit_exactly_one(stores: list[SqlStore]) -> None:
    job = await _job(stores[0])
    runs = [make_run(job, at(i)) for i in range(12)]
    results = await asyncio.gather(
        *(
            stores[i % len(stores)].create_runs([run], _receipt(run.run.id))
            for i, run in enumerate(runs)
        ),
        return_exceptions=True,
    )
    winners = [run.run.id for run, result in zip(runs, results, strict=True) if result is None]
    assert len(winners) == 1, results
    for result in results:
        assert result is None or isinstance(result, KeyTaken), result
        if isinstance(result, KeyTaken):
            assert result.held.body == winners[0]
    assert [r.id for r in (await stores[0].list_runs()).runs] == winners


async def test_concurrent_creates_of_one_job_with_one_key_never_conflict(
    stores: list[SqlStore],
) -> None:
    # Without the key taken first, the losers would trip over the job's name (a 409 "name").
    attempts = [make_job("same") for _ in range(12)]
    results = await asyncio.gather(
        *(
            stores[i % len(stores)].create_jobs([(job, [])], _receipt(job.id))
            for i, job in enumerate(attempts)
        ),
        return_exceptions=True,
    )
    assert sum(result is None for result in results) == 1, results
    assert all(result is None or isinstance(result, KeyTaken) for result in results), results
    stored = await stores[0].get_job("same")
    assert stored is not None
    assert await stores[0].get_key("t", "k", T0) == IdempotencyRecord("h", 201, stored.id)
