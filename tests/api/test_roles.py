"""``create_app(role=...)`` serves only that side's routers; ``tickwork api`` serves the read
side alone and refuses the write side (its broker lives inside ``tickwork up``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from tickwork.api.app import create_app
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.cli.main import app as cli
from tickwork.ports import Scope
from tickwork.serve.api import read_app
from tickwork.store import SqlStore


def _routes(app: FastAPI) -> set[str]:
    paths: dict[str, dict[str, object]] = app.openapi()["paths"]
    return {f"{method.upper()} {path}" for path, ops in paths.items() for method in ops}


def test_each_role_serves_only_its_routers(store: SqlStore) -> None:
    services = Services(store, MemoryBroker())
    everything = _routes(create_app(services))
    write = _routes(create_app(services, role="write"))
    read = _routes(create_app(services, role="read"))
    assert "POST /api/v1/jobs" in write - read
    assert "POST /api/v1/tokens" in write - read
    assert "GET /api/v1/runs" in read - write
    assert "GET /api/v1/runs/{run_id}/logs" in read - write
    assert write | read == everything
    assert "GET /healthz" in write & read


@pytest.fixture
async def reader(store: SqlStore) -> AsyncIterator[httpx2.AsyncClient]:
    issued = await TokenService(store, utc_now).create("reader", Scope.ADMIN)
    transport = httpx2.ASGITransport(app=read_app(store))
    headers = {"Authorization": f"Bearer {issued.secret}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t.test", headers=headers
    ) as client:
        yield client


async def test_read_app_reads_and_never_writes(reader: httpx2.AsyncClient, store: SqlStore) -> None:
    assert (await reader.get("/api/v1/jobs")).status_code == 200
    assert (await reader.get("/api/v1/runs")).status_code == 200
    refused = await reader.post("/api/v1/jobs", json={"name": "x", "schedule": {"kind": "now"}})
    assert refused.status_code == 405
    assert (await reader.get("/api/v1/tokens")).status_code == 404
    # Using a token on a replica must not write its last_used_at.
    assert [t.last_used_at for t in await store.list_tokens()] == [None]


@pytest.mark.parametrize("role", ["write", "all"])
def test_api_command_refuses_the_write_side_in_one_line(role: str) -> None:
    result = CliRunner().invoke(cli, ["api", "--role", role])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: --role {role} needs the scheduler's broker")
