"""The standing security suite runs the API in process over SQLite (the rules are the same on
PostgreSQL: they live above the store), with one token per scope."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx2
import pytest
from fastapi import FastAPI

from tests.api.conftest import NOW
from tests.helpers import FakeClock
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Scope
from tickwork.store import SqlStore

Clients = Callable[[Scope], httpx2.AsyncClient]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def services(sqlite_store: SqlStore, clock: FakeClock) -> Services:
    return Services(sqlite_store, MemoryBroker(), clock=clock)


@pytest.fixture
def security(services: Services, clock: FakeClock) -> Security:
    return Security.over(services, clock=clock)


@pytest.fixture
def app(services: Services, security: Security) -> FastAPI:
    return create_app(services, security=security)


@pytest.fixture
async def tokens(security: Security) -> dict[Scope, str]:
    return {s: (await security.tokens.create(f"t-{s}", s)).secret for s in Scope}


@pytest.fixture
async def as_scope(app: FastAPI, tokens: dict[Scope, str]) -> AsyncIterator[Clients]:
    """``as_scope(Scope.WRITE)``: an API client with a token of that scope."""
    made: dict[Scope, httpx2.AsyncClient] = {}
    for scope, secret in tokens.items():
        made[scope] = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://tickwork.test",
            headers={"Authorization": f"Bearer {secret}"},
        )
    try:
        yield made.__getitem__
    finally:
        for client in made.values():
            await client.aclose()
