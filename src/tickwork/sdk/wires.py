"""How the clients put a ``Call`` on the network: a wire sends one and returns the ``Answer``.

Over a real network both clients send on the SDK's own HTTP/1.1 connections: ``Client``
through a pool of sockets shared by threads (``sdk/http1.py``), ``AsyncClient`` through asyncio
connections (``sdk/http1_async.py``). Against a server that answers at once
(``bench/http_floor.py``), a call cost the client ~70 µs of CPU on one thread and ~35 µs at 32
in flight, against ~250 µs through urllib3 and ~100 µs through aiohttp (the wires of sessions
13-15), and 302-421 and 506-772 µs through httpx2 before them: for a producer that calls
``enqueue`` per job, the HTTP client was most of its own cost. A ``transport`` given to a
client (httpx2's: in-process ASGI or WSGI in tests, a mock) goes through httpx2 as before.

Every wire keeps connections alive and pooled, at most ``max_connections`` at once (more
calls wait for a free one), closes idle connections after ``keepalive`` seconds, and raises
``Unreachable`` when no answer came. None retries: a request that may have reached the server
is never sent twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from tickwork.sdk.errors import Unreachable

if TYPE_CHECKING:
    import httpx2

    from tickwork.sdk.calls import Call


#: JSON as httpx2 writes it (one encoder: ``json.dumps`` with options builds one per call).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class Answer(Protocol):
    """What a call's result is read from (``httpx2.Response`` is one)."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer read whole off the network."""

    status_code: int
    reason_phrase: str
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


@dataclass(frozen=True, slots=True)
class Settings:
    url: str  # the server's base URL, without a trailing slash
    token: str | None
    timeout: float
    max_connections: int
    keepalive: float

    def headers(self, call: Call[Any]) -> tuple[dict[str, str], bytes | None]:
        """The request's headers and body (JSON as httpx2 writes it: compact, UTF-8)."""
        headers = {"User-Agent": "tickwork-sdk", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        body = None
        if call.json is not None:
            body = _encode(call.json).encode()
            headers["Content-Type"] = "application/json"
        if call.headers:
            headers.update(call.headers)
        return headers, body


class HttpxWire:
    """A client given an httpx2 ``transport``: sends through ``httpx2.Client`` over it."""

    def __init__(self, settings: Settings, transport: httpx2.BaseTransport) -> None:
        import httpx2

        self._settings = settings
        self._errors = httpx2.TransportError
        self._http = httpx2.Client(
            base_url=settings.url, timeout=settings.timeout, transport=transport
        )

    def send(self, call: Call[Any]) -> httpx2.Response:
        try:
            return self._http.send(_request(self._http, self._settings, call))
        except self._errors as exc:
            raise Unreachable(self._settings.url, _reason(exc)) from exc

    def close(self) -> None:
        self._http.close()


class AsyncHttpxWire:
    """An async client given an httpx2 ``transport``: sends through ``httpx2.AsyncClient``."""

    def __init__(self, settings: Settings, transport: httpx2.AsyncBaseTransport) -> None:
        import httpx2

        self._settings = settings
        self._errors = httpx2.TransportError
        self._http = httpx2.AsyncClient(
            base_url=settings.url, timeout=settings.timeout, transport=transport
        )

    async def send(self, call: Call[Any]) -> httpx2.Response:
        try:
            return await self._http.send(_request(self._http, self._settings, call))
        except self._errors as exc:
            raise Unreachable(self._settings.url, _reason(exc)) from exc

    async def close(self) -> None:
        await self._http.aclose()


def _request(
    http: httpx2.Client | httpx2.AsyncClient, settings: Settings, call: Call[Any]
) -> httpx2.Request:
    headers, body = settings.headers(call)
    query = call.query() or None
    return http.build_request(call.method, call.url(), params=query, content=body, headers=headers)


def unusable(url: str) -> str | None:
    """Why ``url`` cannot be a tickwork server's base URL (None: it can)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"not an http:// or https:// URL: {url!r}"
    if not parts.hostname:
        return f"no host in {url!r}"
    return None


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
