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


def _headers(token: str | None) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {token}"} if token else None


class Client(JobOperations, RunOperations, AdminOperations, BackfillOperations, InsightOperations):
    """A synchronous client of one tickwork server. Use it as a context manager, or ``close()``.

    ``token`` is a bearer token (``tw_...``); every route but the health checks needs one.
    ``transport`` replaces the network (tests pass one that calls the ASGI app in process).
    """

    is_async = False

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx2.Client(
            base_url=self.url, timeout=timeout, transport=transport, headers=_headers(token)
        )

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
    """

    is_async = True

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx2.AsyncClient(
            base_url=self.url, timeout=timeout, transport=transport, headers=_headers(token)
        )

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
