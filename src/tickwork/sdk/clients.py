"""``Client`` (synchronous) and ``AsyncClient``: the transports that send the operations."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeVar

from tickwork.sdk.admin import AdminOperations
from tickwork.sdk.backfills import BackfillOperations
from tickwork.sdk.calls import Call
from tickwork.sdk.http1 import Http1Wire
from tickwork.sdk.insight import InsightOperations
from tickwork.sdk.jobs import JobOperations
from tickwork.sdk.runs import RunOperations
from tickwork.sdk.wires import AsyncHttpxWire, HttpxWire, Settings

if TYPE_CHECKING:
    import httpx2

    from tickwork.sdk.http1_async import AsyncHttp1Wire

T = TypeVar("T")

#: Where ``tickwork up`` listens unless told otherwise (the CLI's default too).
DEFAULT_URL = "http://127.0.0.1:8080"


#: Requests one client may have in flight at once (an ``AsyncClient`` under ``gather``, or a
#: ``Client`` shared by threads); each holds its own connection.
MAX_CONNECTIONS = 100

#: Seconds an idle pooled connection is kept: under the server's 5 s keep-alive (uvicorn's
#: default), so the server never closes one the client is about to send on.
KEEPALIVE_EXPIRY = 4.0


def _settings(url: str, token: str | None, timeout: float, max_connections: int) -> Settings:
    return Settings(url.rstrip("/"), token, timeout, max_connections, KEEPALIVE_EXPIRY)


class Client(JobOperations, RunOperations, AdminOperations, BackfillOperations, InsightOperations):
    """A synchronous client of one tickwork server. Use it as a context manager, or ``close()``.

    ``token`` is a bearer token (``tw_...``); every route but the health checks needs one.
    Calls go over the SDK's own pool of HTTP/1.1 connections (``sdk/http1.py``); ``transport``
    (httpx2's) replaces the network (tests pass one that calls the ASGI app in process).
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
        settings = _settings(url, token, timeout, max_connections)
        self.url = settings.url
        self._wire = Http1Wire(settings) if transport is None else HttpxWire(settings, transport)

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
        self._wire.close()

    def _send(self, call: Call[T]) -> T:
        return call.result(self._wire.send(call))


class AsyncClient(
    JobOperations, RunOperations, AdminOperations, BackfillOperations, InsightOperations
):
    """An asynchronous client of one tickwork server: ``Client``'s methods, each awaited.
    Use it as an async context manager, or ``await close()``.

    Calls go over the SDK's own HTTP/1.1 connections (``sdk/http1_async.py``); ``transport``
    (httpx2's) replaces the network (tests pass ``httpx2.ASGITransport(app=...)``).
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
        settings = _settings(url, token, timeout, max_connections)
        self.url = settings.url
        if transport is None:
            from tickwork.sdk.http1_async import AsyncHttp1Wire  # asyncio: only async users pay

            self._wire: AsyncHttp1Wire | AsyncHttpxWire = AsyncHttp1Wire(settings)
        else:
            self._wire = AsyncHttpxWire(settings, transport)

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
        await self._wire.close()

    async def _send(self, call: Call[T]) -> T:
        return call.result(await self._wire.send(call))
