"""The SDK's pools and ``apply_job`` against the in-process app (async; the sync client is the
same description sent by another transport, and the CLI tests drive it)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from examples.etl import etl
from tickwork.api.app import create_app
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Scope
from tickwork.sdk import ApiError, AsyncClient, Client
from tickwork.sdk.definitions import job_body, load_definition
from tickwork.store import open_store

ETL_YAML = str(Path(__file__).resolve().parents[3] / "examples" / "etl.yaml")


@pytest.fixture
async def client(sqlite_url: str) -> AsyncIterator[AsyncClient]:
    store = await open_store(sqlite_url)
    transport = httpx2.ASGITransport(app=create_app(Services(store, MemoryBroker())))
    admin = await TokenService(store, utc_now).create("sdk", Scope.ADMIN)
    try:
        async with AsyncClient("http://t.test", token=admin.secret, transport=transport) as tw:
            yield tw
    finally:
        await store.close()


async def test_pools_are_set_listed_read_and_deleted(client: AsyncClient) -> None:
    created = await client.set_pool("db", 4, "the warehouse")
    assert created == {"name": "db", "slots": 4, "used": 0, "description": "the warehouse"}
    assert (await client.set_pool("db", 2))["description"] == "the warehouse"
    assert [p["name"] for p in await client.list_pools()] == ["db"]
    assert (await client.get_pool("db"))["slots"] == 2
    await client.delete_pool("db")
    with pytest.raises(ApiError) as missing:
        await client.get_pool("db")
    assert (missing.value.status, missing.value.field) == (404, "pool")


async def test_apply_job_takes_a_workflow_a_definition_or_a_body(client: AsyncClient) -> None:
    await client.set_pool("db", 2)
    first = await client.apply_job(etl)
    assert first["outcome"] == "created"
    assert [t["name"] for t in first["job"]["tasks"]][-1] == "load"
    assert (await client.apply_job(load_definition(ETL_YAML)))["outcome"] == "unchanged"
    body = job_body(etl.parse())
    assert (await client.apply_job(body))["outcome"] == "unchanged"
    updated = await client.apply_job({**body, "max_active_runs": 2})
    assert (updated["outcome"], updated["job"]["max_active_runs"]) == ("updated", 2)
    assert updated["job"]["id"] == first["job"]["id"]


async def test_apply_job_reports_the_field_at_fault(client: AsyncClient) -> None:
    with pytest.raises(ApiError) as refused:
        await client.apply_job(etl)  # no pool "db" yet
    assert (refused.value.status, refused.value.field) == (422, "tasks[0].pool")
    assert (await client.list_jobs())["jobs"] == []


def test_apply_job_describes_a_put_by_name() -> None:
    call = Client.apply_job._describe(job_body(etl.parse()), allow_past=True)
    assert (call.method, call.url(), call.query()) == (
        "PUT",
        "/api/v1/jobs/etl",
        {"allow_past": "true"},
    )


def test_importing_tickwork_stays_light_with_the_decorators_bound() -> None:
    heavy = "('httpx2', 'croniter', 'yaml', 'tickwork.core.schedule')"
    check = (
        "import sys, tickwork, tickwork.sdk.workflow\n"
        "assert not isinstance(tickwork.workflow, type(sys)), 'the module hides the decorator'\n"
        f"print([m for m in {heavy} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
