"""How the clients put a ``Call`` on the network: a wire sends one and returns the ``Answer``.

Over a real network ``Client`` sends through urllib3's connection pool and ``AsyncClient``
through aiohttp. Against a server that answers at once (``bench/http_floor.py``), a call cost
the client 86-110 µs of CPU through aiohttp against 506-772 µs through httpx2's
``AsyncClient`` (32 in flight: 6,500-8,100 calls/s against 1,500-1,800), and 171-188 µs
through urllib3 against 302-421 µs through httpx2's ``Client``: for a producer that calls
``enqueue`` per job, the HTTP client was most of its own cost. A ``transport`` given to a
client (httpx2's: in-process ASGI or WSGI in tests, a mock) goes through httpx2 as before.

Every wire keeps connections alive and pooled, at most ``max_connections`` at once (more
calls wait for a free one), and raises ``Unreachable`` when no answer came. aiohttp and httpx2
close idle connections after ``keepalive`` seconds; urllib3 keeps them until the server
closes one, which it notices before it sends on it. None retries: a request that may have
reached the server is never sent twice.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode, urlsplit

from tickwork.sdk.errors import Unreachable

if TYPE_CHECKING:
    import aiohttp
    import httpx2
    import urllib3
    from yarl import URL

    from tickwork.sdk.calls import Call


#: JSON as httpx2 writes it (one encoder: ``json.dumps`` with options builds one per call).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
#: Parsed URLs an ``AsyncClient`` keeps (one per job it enqueues to, run it reads, ...).
KEPT_URLS = 256


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

    def target(self, call: Call[Any]) -> str:
        """The request's path and query under the base URL's own path."""
        query = call.query()
        path = urlsplit(self.url).path + call.url()
        return f"{path}?{urlencode(query)}" if query else path


class Urllib3Wire:
    """``Client``'s wire: one urllib3 pool, shared by the threads that use the client."""

    def __init__(self, settings: Settings) -> None:
        import urllib3

        self._settings = settings
        self._errors: type[Exception] = urllib3.exceptions.HTTPError
        self._pool: urllib3.HTTPConnectionPool | None = None
        if unusable(settings.url) is None:
            timeout = urllib3.Timeout(connect=settings.timeout, read=settings.timeout)
            self._pool = urllib3.connection_from_url(
                settings.url, maxsize=settings.max_connections, block=True, timeout=timeout,
                retries=False,
            )  # fmt: skip

    def send(self, call: Call[Any]) -> Reply:
        if self._pool is None:  # as any other URL nothing answers at: on the call
            raise Unreachable(self._settings.url, unusable(self._settings.url) or "bad URL")
        headers, body = self._settings.headers(call)
        try:
            response = self._pool.urlopen(
                call.method, self._settings.target(call), body=body, headers=headers,
                pool_timeout=math.ceil(self._settings.timeout), redirect=False,
            )  # fmt: skip
        except self._errors as exc:
            raise Unreachable(self._settings.url, _reason(exc)) from exc
        return Reply(response.status, response.reason or "", response.data)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()


class AiohttpWire:
    """``AsyncClient``'s wire: an aiohttp session, opened on the event loop of the first call
    (a call from another loop opens another: a session belongs to one loop)."""

    def __init__(self, settings: Settings) -> None:
        import aiohttp

        self._settings = settings
        self._aiohttp = aiohttp
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unusable = unusable(settings.url)
        #: Each target's parsed URL (yarl parses one in ~10 µs; a producer calls a few targets).
        self._urls: dict[str, URL] = {}

    def _opened(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            lib, s = self._aiohttp, self._settings
            connector = lib.TCPConnector(limit=s.max_connections, keepalive_timeout=s.keepalive)
            timeout = lib.ClientTimeout(
                total=None, connect=s.timeout, sock_connect=s.timeout, sock_read=s.timeout
            )
            self._session = lib.ClientSession(
                connector=connector, timeout=timeout, auto_decompress=False,
                skip_auto_headers=("Accept-Encoding",),
            )  # fmt: skip
            self._loop = loop
        return self._session

    async def send(self, call: Call[Any]) -> Reply:
        if self._unusable is not None:
            raise Unreachable(self._settings.url, self._unusable)
        headers, body = self._settings.headers(call)
        query = call.query()
        full = self._settings.url + call.url() + (f"?{urlencode(query)}" if query else "")
        url = self._urls.get(full)
        if url is None:
            from yarl import URL

            url = URL(full, encoded=True)  # seg() quoted the path's values; the query is encoded
            if len(self._urls) >= KEPT_URLS:
                self._urls.clear()
            self._urls[full] = url
        try:
            async with self._opened().request(
                call.method, url, data=body, headers=headers, allow_redirects=False
            ) as response:
                return Reply(response.status, response.reason or "", await response.read())
        except (self._aiohttp.ClientError, TimeoutError) as exc:
            raise Unreachable(self._settings.url, _reason(exc)) from exc

    async def close(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None


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
