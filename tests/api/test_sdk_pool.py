"""The SDK keeps its connections alive and pooled, against a real HTTP server (uvicorn on a
loopback socket, the API app over the test store): the server counts the TCP connections the
requests came on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

import tickwork.sdk.clients as sdk_clients
from tests.api.conftest import cron_job
from tests.api.served import serving
from tickwork.sdk import AsyncClient, Client

IN_FLIGHT = 32

#: Keep-alive of both sides in these tests. At the SDK's 4 s a connection that answered first
#: in a burst could expire before the next burst on a loaded CI machine (once: 33 connections
#: for 32), and the test would count the expiry, not the pool's reuse.
KEEPALIVE = 120.0


class Connections:
    """ASGI wrapper: the client address of every HTTP request (one per connection); with a
    ``gate``, each request waits until that many are in the app at once."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.peers: set[tuple[str, int]] = set()
        self.requests = 0
        self.gate = 0
        self._inside = 0
        self._full = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.peers.add(tuple(scope["client"]))
            self.requests += 1
            if self.gate:
                await self._wait_for_all()
        await self.app(scope, receive, send)

    async def _wait_for_all(self) -> None:
        self._inside += 1
        if self._inside >= self.gate:
            self._full.set()
        async with asyncio.timeout(30):
            await self._full.wait()
        self._inside -= 1
        if self._inside == 0:
            self._full.clear()


@pytest.fixture
async def served(
    app: FastAPI, api: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, Connections]]:
    monkeypatch.setattr(sdk_clients, "KEEPALIVE_EXPIRY", KEEPALIVE)
    r = await api.post("/api/v1/jobs", json=cron_job("work"))
    assert r.status_code == 201, r.text
    counted = Connections(app)
    async with serving(counted, timeout_keep_alive=int(KEEPALIVE) * 2) as url:
        yield url, counted


async def test_async_client_has_32_in_flight_and_reuses_their_connections(
    served: tuple[str, Connections], admin_token: str
) -> None:
    url, counted = served
    counted.gate = IN_FLIGHT  # every burst must be in the server at once to pass the gate
    async with AsyncClient(url, token=admin_token) as tw:
        for _ in range(4):
            done = await asyncio.gather(*(tw.enqueue("work") for _ in range(IN_FLIGHT)))
            assert len({e["run_id"] for e in done}) == IN_FLIGHT
    assert counted.requests == 4 * IN_FLIGHT
    assert len(counted.peers) == IN_FLIGHT  # the later bursts opened none


async def test_client_sends_every_call_on_one_connection(
    served: tuple[str, Connections], admin_token: str
) -> None:
    url, counted = served

    def produce() -> None:
        with Client(url, token=admin_token) as tw:
            for _ in range(100):
                tw.enqueue("work")

    await asyncio.to_thread(produce)
    assert counted.requests == 100
    assert len(counted.peers) == 1


async def test_max_connections_bounds_the_requests_in_flight(
    served: tuple[str, Connections], admin_token: str
) -> None:
    url, counted = served
    async with AsyncClient(url, token=admin_token, max_connections=4) as tw:
        await asyncio.gather(*(tw.enqueue("work") for _ in range(40)))
    assert counted.requests == 40
    assert len(counted.peers) <= 4
