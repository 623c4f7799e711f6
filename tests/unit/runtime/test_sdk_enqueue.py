"""``enqueue`` / ``enqueue_many`` of both clients against the in-process app."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from tickwork.api.app import create_app
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Scope
from tickwork.sdk import ApiError, AsyncClient
from tickwork.store import open_store

NOOP = {"kind": "python", "target": "tests.fixtures.tasks:noop", "kwargs": {"a": 1}}
CRON = {"kind": "cron", "cron": "0 3 * * *", "timezone": "UTC"}
PARAMS = {"properties": {"b": {"type": "integer"}, "n": {"type": "integer"}}}


@pytest.fixture
async def client(sqlite_url: str) -> AsyncIterator[AsyncClient]:
    store = await open_store(sqlite_url)
    transport = httpx2.ASGITransport(app=create_app(Services(store, MemoryBroker())))
    admin = await TokenService(store, utc_now).create("sdk", Scope.ADMIN)
    try:
        async with AsyncClient(
            "http://tickwork.test", token=admin.secret, transport=transport
        ) as tw:
            await tw.create_job({"name": "work", "schedule": CRON, "task": NOOP, "params": PARAMS})  # type: ignore[typeddict-item]
            yield tw
    finally:
        await store.close()


async def test_enqueue_one_run_with_params_priority_and_delay(client: AsyncClient) -> None:
    done = await client.enqueue("work", {"b": 2}, priority=5)
    run = await client.get_run(done["run_id"])
    assert run["trigger"] == "enqueue"
    assert [tr["id"] for tr in run["task_runs"]] == done["task_run_ids"]
    assert run["task_runs"][0]["config"]["kwargs"] == {"a": 1, "b": 2}
    assert run["task_runs"][0]["priority"] == 5
    later = await client.enqueue("work", delay=60)
    assert (await client.get_run(later["run_id"]))["state"] == "scheduled"


async def test_enqueue_many_returns_ids_in_order(client: AsyncClient) -> None:
    done = await client.enqueue_many("work", [{"n": i} for i in range(3)] + [None])
    assert len(done["run_ids"]) == 4
    kwargs = [
        (await client.get_run(run_id))["task_runs"][0]["config"]["kwargs"]
        for run_id in done["run_ids"]
    ]
    assert kwargs == [{"a": 1, "n": 0}, {"a": 1, "n": 1}, {"a": 1, "n": 2}, {"a": 1}]


async def test_enqueue_errors_raise_api_error_with_the_field(client: AsyncClient) -> None:
    with pytest.raises(ApiError) as missing:
        await client.enqueue("nope")
    assert missing.value.status == 404
    with pytest.raises(ApiError) as bad:
        await client.enqueue_many("work", [{}, {}], priority=500)
    assert (bad.value.status, bad.value.field) == (422, "items[0].priority")


async def test_idempotency_key_makes_a_retry_safe(client: AsyncClient) -> None:
    first = await client.enqueue_many("work", [{"n": 1}], idempotency_key="k1")
    again = await client.enqueue_many("work", [{"n": 1}], idempotency_key="k1")
    assert again == first
    assert len((await client.list_runs(job="work"))["runs"]) == 1
