"""The API through an in-process ASGI client, over the ``store`` fixture (SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from tests.helpers import FakeClock, Wakes, utc
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Delivery, Scope, Store

#: "Now" for every API test: far enough ahead that an `at` of 2027 is in the future.
NOW = utc(2026, 6, 1, 12, 0, 0)


@pytest.fixture
def broker() -> MemoryBroker:
    return MemoryBroker()


@pytest.fixture
def wakes() -> Wakes:
    return Wakes()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def services(store: Store, broker: MemoryBroker, wakes: Wakes, clock: FakeClock) -> Services:
    return Services(store, broker, wake=wakes, clock=clock)


@pytest.fixture
def security(services: Services, clock: FakeClock) -> Security:
    return Security.over(services, clock=clock)


@pytest.fixture
def app(services: Services, security: Security) -> FastAPI:
    return create_app(services, security=security)


@pytest.fixture
async def admin_token(security: Security) -> str:
    """The secret of an admin token (the ``api`` client sends it)."""
    return (await security.tokens.create("test-admin", Scope.ADMIN)).secret


@pytest.fixture
async def api(app: FastAPI, admin_token: str) -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {admin_token}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://tickwork.test", headers=headers
    ) as client:
        yield client


async def drain(broker: MemoryBroker, queue: str = "default") -> list[Delivery]:
    """Everything published to ``queue`` so far."""
    return await broker.consume([queue], max_items=10_000, timeout=0.01)


def now_job(name: str, **extra: Any) -> dict[str, Any]:
    """A JobCreate body: run ``true`` now."""
    return {
        "name": name,
        "schedule": {"kind": "now"},
        "task": {"kind": "shell", "argv": ["true"]},
        **extra,
    }


def cron_job(
    name: str, cron: str = "30 2 * * *", tz: str = "Europe/Berlin", **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"kind": "cron", "cron": cron, "timezone": tz},
        "task": {"kind": "python", "target": "tests.fixtures.tasks:noop"},
        **extra,
    }


def at_job(name: str, at: str = "2027-01-02T03:04:05Z") -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"kind": "at", "at": at},
        "task": {"kind": "http", "method": "GET", "url": "https://example.org/health"},
    }


def error_of(response: httpx2.Response) -> dict[str, Any]:
    """The ``error`` object of an error response, checking the shape on the way."""
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert {"code", "message"} <= set(error), error
    assert isinstance(error["message"], str) and error["message"]
    return error
