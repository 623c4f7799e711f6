"""The http runner: one request per attempt through a shared ``httpx2.AsyncClient``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from tickwork.core.errors import TickworkError, ValidationError
from tickwork.core.model import TaskRun
from tickwork.core.secret_refs import url_auth
from tickwork.ports import LogSink, RunResult
from tickwork.worker.runners._wait import Ending, ended, timed_out, wait_for_end

DEFAULT_TIMEOUT = 30.0
LOGGED_BODY_LIMIT = 64 * 1024
_METHOD = re.compile(r"^[A-Z]+$")
_NO_JSON = object()


class RequestRefused(TickworkError):
    """Raised by an ``HttpGuard`` to stop a request before it is sent."""


#: Checked before every request; raises ``RequestRefused`` to forbid it (an SSRF guard).
HttpGuard = Callable[[httpx2.URL], Awaitable[None]]


async def allow_all(url: httpx2.URL) -> None:
    """The default guard: every URL may be requested."""


@dataclass(frozen=True, slots=True)
class HttpSpec:
    """An http task's config, checked. ``json`` is ``_NO_JSON`` unless the body is JSON."""

    method: str
    url: httpx2.URL
    headers: Mapping[str, str]
    content: str | None = None
    json: Any = _NO_JSON
    auth: tuple[str, str] | None = None  # url_auth, resolved: HTTP Basic


def parse_http_spec(config: Mapping[str, Any]) -> HttpSpec:
    """Check an http task's config; raise ``ValidationError`` naming the field at fault."""
    method = config.get("method", "GET")
    if not isinstance(method, str) or not _METHOD.match(method.upper()):
        raise ValidationError("config.method", "must be an HTTP method such as GET or POST")
    headers = config.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ValidationError("config.headers", "must be an object mapping names to strings")
    url, body = _parse_url(config.get("url")), config.get("body")
    try:
        auth = url_auth(config)
    except ValueError as exc:
        raise ValidationError("config.url_auth", str(exc)) from None
    if body is None or isinstance(body, str):
        return HttpSpec(method.upper(), url, headers, content=body, auth=auth)
    return HttpSpec(method.upper(), url, headers, json=body, auth=auth)


def _parse_url(raw: object) -> httpx2.URL:
    reason = "must be an absolute http:// or https:// URL"
    if not isinstance(raw, str):
        raise ValidationError("config.url", reason)
    try:
        url = httpx2.URL(raw)
    except httpx2.InvalidURL as exc:
        raise ValidationError("config.url", f"{reason} ({exc})") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ValidationError("config.url", reason)
    return url


class HttpRunner:
    """Runs ``http`` tasks: ``method`` ``url`` with ``headers`` and ``body``.

    A ``str`` body is sent as it is; any other JSON value is sent as JSON. The attempt
    succeeds on a 2xx status; any other status fails it, redirects included (they are not
    followed unless the client given says so). The request line, the status and the first
    64 KiB of the response body are written to the sink. The timeout is the task's, or
    ``default_timeout`` seconds. ``guard`` sees each URL before it is requested (the seam for
    an SSRF guard; a guard that must pin resolved addresses belongs in the client's
    transport). The runner owns the client it creates; call :meth:`aclose` when done.
    """

    def __init__(
        self,
        *,
        client: httpx2.AsyncClient | None = None,
        guard: HttpGuard = allow_all,
        default_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._owns_client = client is None
        # The worker's slot count bounds concurrency, so the pool need not queue requests.
        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=50)
        self._client = client or httpx2.AsyncClient(follow_redirects=False, limits=limits)
        self._guard = guard
        self._default_timeout = default_timeout

    @property
    def client(self) -> httpx2.AsyncClient:
        return self._client

    async def aclose(self) -> None:
        """Close the client, if the runner created it."""
        if self._owns_client:
            await self._client.aclose()

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        """Execute one attempt; see the class docstring and ``tickwork.ports.Runner``."""
        try:
            spec = parse_http_spec(task_run.config)
        except ValidationError as exc:
            return RunResult(ok=False, error=str(exc))
        timeout = task_run.timeout or self._default_timeout
        work = asyncio.ensure_future(self._exchange(spec, timeout, log))
        ending = await wait_for_end(work, timeout, cancel)
        if ending is Ending.DONE:
            return work.result()
        work.cancel()
        await asyncio.wait({work}, timeout=0.5)
        log.write("system", f"{ending.value}: request abandoned\n")
        return ended(ending, timeout)

    async def _exchange(self, spec: HttpSpec, timeout: float, log: LogSink) -> RunResult:
        try:
            await self._guard(spec.url)
        except RequestRefused as exc:
            return RunResult(ok=False, error=f"request refused: {exc}")
        log.write("system", f"{spec.method} {spec.url}\n")
        try:
            return await self._send(spec, timeout, log)
        except httpx2.TimeoutException:
            return timed_out(timeout)
        except httpx2.HTTPError as exc:
            return RunResult(ok=False, error=f"{spec.method} {spec.url} failed: {_describe(exc)}")

    async def _send(self, spec: HttpSpec, timeout: float, log: LogSink) -> RunResult:
        extra: dict[str, Any] = {} if spec.json is _NO_JSON else {"json": spec.json}
        if spec.auth is not None:
            extra["auth"] = spec.auth
        async with self._client.stream(
            spec.method,
            spec.url,
            headers=spec.headers,
            content=spec.content,
            timeout=timeout,
            **extra,
        ) as response:
            status = f"HTTP {response.status_code} {response.reason_phrase}"
            log.write("system", f"{status}\n")
            await _log_body(response, log)
        return RunResult(ok=True) if response.is_success else RunResult(ok=False, error=status)


async def _log_body(response: httpx2.Response, log: LogSink) -> None:
    # Read one chunk past the limit at most: enough to know the body was cut.
    parts: list[bytes] = []
    received = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        received += len(chunk)
        if received > LOGGED_BODY_LIMIT:
            break
    body = b"".join(parts)[:LOGGED_BODY_LIMIT]
    if body:
        log.write("stdout", _decode(body, response.encoding))
    if received > LOGGED_BODY_LIMIT:
        log.write("system", f"\nresponse body truncated to its first {LOGGED_BODY_LIMIT} bytes\n")


def _decode(body: bytes, encoding: str | None) -> str:
    try:
        return body.decode(encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", errors="replace")


def _describe(exc: httpx2.HTTPError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
