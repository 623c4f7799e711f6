"""``Client`` (synchronous) and ``AsyncClient``: the transports that send the operations."""

from __future__ import annotations

from types import TracebackType
from typing import Self, TypeVar

import httpx2

from tickwork.sdk.admin import AdminOperations
from tickwork.sdk.backfills import BackfillOperations
from tickwork.sdk.calls import Call
from tickwork.sdk.errors import Unreachable
from tickwork.sdk.insight import InsightOperations
from tickwork.sdk.jobs import JobOperations
from tickwork.sdk.runs import RunOperations

T = TypeVar("T")

#: Where ``tickwork up`` listens unless told otherwise (the CLI's default too).
DEFAULT_URL = "http://127.0.0.1:8080"


#: Requests one client may have in flight at once (an ``AsyncClient`` under ``gather``, or a
#: ``Client`` shared by threads); each holds its own connection.
MAX_CONNECTIONS = 100

#: Seconds an idle pooled connection is kept: under the server's 5 s keep-alive (uvicorn's
#: default), so the server never closes one the client is about to send on.
KEEPALIVE_EXPIRY = 4.0


def _limits(max_connections: int) -> httpx2.Limits:
    """Keep-alive for every connection the pool opens (httpx2 keeps only 20 by default, so
    32 requests in flight closed and reopened 12 connections after every burst). Idle ones
    are dropped after ``KEEPALIVE_EXPIRY``."""
    return httpx2.Limits(
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        keepalive_expiry=KEEPALIVE_EXPIRY,
    )


def _headers(token: str | None) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {token}"} if token else None


class Client(JobOperations, RunOperations, AdminOperations, BackfillOperations, InsightOperations):
    """A synchronous client of one tickwork server. Use it as a context manager, or ``close()``.

    ``token`` is a bearer token (``tw_...``); every route but the health checks needs one.
    ``transport`` replaces the network (tests pass one that calls the ASGI app in process).
    Connections are kept alive and pooled: up to ``max_connections`` (threads sharing the
    client each hold one while their request runs).
    """

    is_async = False

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        transport: httpx2.BaseTransport | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx2.Client(
            base_url=self.url, timeout=timeout, transport=transport, headers=_headers(token),
            limits=_limits(max_connections),
        )  # fmt: skip

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.url(), **call.options())
        except httpx2.TransportError as e:
            raise Unreachable(self.url, str(e) or type(e).__name__) from e
        return call.result(response)


class AsyncClient(
    JobOperations, RunOperations, AdminOperations, BackfillOperations, InsightOperations
):
    """An asynchronous client of one tickwork server: ``Client``'s methods, each awaited.
    Use it as an async context manager, or ``await close()``.

    ``transport`` replaces the network (tests pass ``httpx2.ASGITransport(app=...)``).
    Connections are kept alive and pooled: up to ``max_connections`` requests in flight at
    once (``asyncio.gather`` of many ``enqueue`` calls), more wait for a free connection.
    """

    is_async = True

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        transport: httpx2.AsyncBaseTransport | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx2.AsyncClient(
            base_url=self.url, timeout=timeout, transport=transport, headers=_headers(token),
            limits=_limits(max_connections),
        )  # fmt: skip

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.url(), **call.options())
        except httpx2.TransportError as e:
            raise Unreachable(self.url, str(e) or type(e).__name__) from e
        return call.result(response)
