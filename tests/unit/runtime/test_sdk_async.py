"""``AsyncClient`` against the in-process app, and its parity with ``Client``."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx2
import pytest

import tickwork
from tickwork.api.app import create_app
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Scope
from tickwork.sdk import ApiError, AsyncClient, Client, Unreachable
from tickwork.store import open_store

NOOP = {"kind": "python", "target": "tests.fixtures.tasks:noop"}


@pytest.fixture
async def client(sqlite_url: str) -> AsyncIterator[AsyncClient]:
    store = await open_store(sqlite_url)
    transport = httpx2.ASGITransport(app=create_app(Services(store, MemoryBroker())))
    admin = await TokenService(store, utc_now).create("sdk", Scope.ADMIN)
    try:
        async with AsyncClient(
            "http://tickwork.test", token=admin.secret, transport=transport
        ) as tw:
            yield tw
    finally:
        await store.close()


async def test_async_client_jobs(client: AsyncClient) -> None:
    schedule = {"kind": "cron", "cron": "0 3 * * *", "timezone": "UTC"}
    job = await client.create_job({"name": "etl", "schedule": schedule, "task": NOOP})  # type: ignore[typeddict-item]
    assert job["name"] == "etl"
    assert [j["name"] for j in (await client.list_jobs(prefix="et"))["jobs"]] == ["etl"]
    assert (await client.pause("etl"))["paused"] is True
    assert (await client.resume("etl"))["paused"] is False
    assert (await client.update_job("etl", {"priority": 7}))["priority"] == 7
    assert len((await client.upcoming("etl", 3))["fires"]) == 3
    await client.delete_job("etl")
    with pytest.raises(ApiError) as missing:
        await client.get_job("etl")
    assert missing.value.status == 404


async def test_async_client_runs_and_logs(client: AsyncClient) -> None:
    schedule = {"kind": "cron", "cron": "0 3 * * *", "timezone": "UTC"}
    params = {"properties": {"day": {"type": "string"}}}
    await client.create_job({"name": "etl", "schedule": schedule, "task": NOOP, "params": params})  # type: ignore[typeddict-item]
    run = await client.trigger("etl", "2026-05-01T00:00:00Z", params={"day": "x"})
    assert (await client.get_run(run["id"]))["task_runs"][0]["config"]["kwargs"] == {"day": "x"}
    assert [r["id"] for r in (await client.list_runs(job="etl"))["runs"]] == [run["id"]]
    logs = await client.logs(run["id"])
    assert (logs["run_id"], logs["chunks"]) == (run["id"], [])
    assert (await client.cancel_run(run["id"]))["state"] == "cancelled"
    assert (await client.dead_letters())["task_runs"] == []


async def test_async_client_cancels_and_retries_one_task_run(client: AsyncClient) -> None:
    await client.create_job({"name": "etl", "schedule": {"kind": "now"}, "task": NOOP})  # type: ignore[typeddict-item]
    [run] = (await client.list_runs(job="etl"))["runs"]
    task_run_id = (await client.get_run(run["id"]))["task_runs"][0]["id"]
    assert (await client.cancel_task_run(task_run_id))["task_runs"][0]["state"] == "cancelled"
    with pytest.raises(ApiError) as finished:
        await client.cancel_task_run(task_run_id)
    assert (finished.value.status, finished.value.field) == (409, "task_run")
    retried = await client.retry_task_run(task_run_id)
    assert (retried["id"], retried["task_runs"][0]["attempt"]) == (run["id"], 2)


async def test_async_client_tokens(client: AsyncClient) -> None:
    made = await client.create_token("reader", "read")
    assert made["secret"].startswith("tw_")
    assert {t["name"] for t in await client.list_tokens()} == {"sdk", "reader"}
    assert (await client.revoke_token("reader"))["revoked_at"] is not None
    assert (await client.health())["status"] == "ok"


async def test_async_client_reports_an_unreachable_server() -> None:
    async with AsyncClient("http://127.0.0.1:9") as tw:
        with pytest.raises(Unreachable):
            await tw.health()


def _public(client: object) -> dict[str, inspect.Signature]:
    methods = {name: getattr(client, name) for name in dir(client) if not name.startswith("_")}
    return {name: inspect.signature(m) for name, m in methods.items() if callable(m)}


async def test_both_clients_expose_the_same_methods_and_signatures() -> None:
    with Client() as sync:
        async with AsyncClient() as async_:
            assert _public(sync) == _public(async_)
            assert {"create_job", "list_runs", "logs", "create_token", "close"} <= _public(
                sync
            ).keys()
            for name in _public(sync):
                assert inspect.iscoroutinefunction(getattr(async_, name)), name
                assert not inspect.iscoroutinefunction(getattr(sync, name)), name


def test_tickwork_exports_the_clients_lazily() -> None:
    assert (tickwork.Client, tickwork.AsyncClient) == (Client, AsyncClient)
    heavy = "('httpx2', 'fastapi', 'sqlalchemy')"
    check = f"import sys, tickwork; print([m for m in {heavy} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_idempotency_key_makes_a_retried_create_and_trigger_happen_once(
    client: AsyncClient,
) -> None:
    job = {"name": "once", "schedule": {"kind": "cron", "cron": "0 3 * * *"}, "task": NOOP}
    first = await client.create_job(job, idempotency_key="create-1")  # type: ignore[arg-type]
    again = await client.create_job(job, idempotency_key="create-1")  # type: ignore[arg-type]
    assert again["id"] == first["id"]
    assert [j["name"] for j in (await client.list_jobs())["jobs"]] == ["once"]

    run = await client.trigger("once", idempotency_key="trigger-1")
    rerun = await client.trigger("once", idempotency_key="trigger-1")
    assert rerun["id"] == run["id"]
    assert len((await client.list_runs(job="once"))["runs"]) == 1

    other = {**job, "name": "other"}
    with pytest.raises(ApiError) as refused:
        await client.create_job(other, idempotency_key="create-1")  # type: ignore[arg-type]
    assert refused.value.status == 409
