"""The single enqueue answered ahead of the middleware stack and the router.

``POST /api/v1/jobs/{name}/runs`` is the task queue's data plane: thousands a second, one run
each. Through the app, a request passes Starlette's server-error layer, FastAPI's exception
telemetry and body limit, the request timer, our body limit, the audit trail, FastAPI's
exception and exit-stack layers and the router's match over every route before the route's lean
handler (``hot.py``) sees it; each layer wraps ``receive`` and ``send`` again.
``EnqueueFastPath``, ahead of the whole stack (``app._fast_path_first``), answers a *plain*
enqueue itself and does for it what those layers do, in one place:

- body limit: a declared length over the limit, or a body that grows past it, goes down the
  stack (``BodyLimit`` answers the 413);
- auth: a bearer token that authenticates with the route's scope (``hot.SCOPE``); the job's
  own access check runs in the service, as for every enqueue;
- metrics: the request's duration, under the route's template, as ``RequestTimer`` records it;
- audit: nothing, as the audit trail does for the enqueue routes (``audit.UNAUDITED``);
- errors: the app's own exception handlers answer, in the API's one error shape (the most
  specific one, also for a store failure while reading the token, which the server-error
  layer would have answered with the catch-all's 500).

Plain means what it means for the lean handler, and no ``Idempotency-Key`` (that path keeps the
key's replay logic in one place) and tracing off (FastAPI's server span per request is made
in the stack). Anything else goes down the stack unchanged, with the body already read
replayed: the fast path only ever answers what the stack would answer the same way.
"""

from __future__ import annotations

import json
import re
import time

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.api.auth import Security
from tickwork.api.hot import IRREGULAR, SCOPE, enqueue_plain, plain_body
from tickwork.api.text import NUL
from tickwork.app.services import Services
from tickwork.observe import tracing
from tickwork.observe.http import observe_request
from tickwork.ports import ApiToken

#: The route's path (the router's prefix and template) and its template, for the metrics.
TEMPLATE = "/api/v1/jobs/{name}/runs"
_PATH = re.compile(r"/api/v1/jobs/([^/]+)/runs")
_HEADERS = [(b"content-type", b"application/json")]
_COMPACT = {"ensure_ascii": False, "allow_nan": False, "separators": (",", ":")}


class EnqueueFastPath:
    """ASGI middleware: see the module's doc."""

    def __init__(
        self, app: ASGIApp, *, services: Services, security: Security, max_body: int
    ) -> None:
        self.app = app
        self._services, self._tokens, self._max = services, security.tokens, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = None
        if scope["type"] == "http" and scope["method"] == "POST" and not scope["query_string"]:
            match = _PATH.fullmatch(scope["path"])
        if match is None or NUL in match.group(1) or tracing.enabled():
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        headers = _headers(scope)
        if headers is None or b"idempotency-key" in headers or _length(headers) > self._max:
            await self.app(scope, receive, send)
            return
        chunks, whole = await _read(receive, self._max)
        try:
            token = await self._token(headers) if whole else None
        except Exception as exc:  # the store, reading a token: answered as the stack would
            status = await _answer_error(scope, send, exc)
            observe_request(TEMPLATE, "POST", status, time.perf_counter() - start)
            return
        parsed = IRREGULAR
        if token is not None:
            content_type = headers.get(b"content-type")
            kind = None if content_type is None else content_type.decode("latin-1")
            parsed = plain_body(b"".join(chunks), kind)
        if parsed is IRREGULAR:  # the stack answers it (a 401, 403, 413 or 422), as before
            await self.app(scope, _replay(chunks, whole, receive), send)
            return
        status = await self._enqueue(scope, send, match.group(1), token, parsed)  # type: ignore[arg-type]
        observe_request(TEMPLATE, "POST", status, time.perf_counter() - start)

    async def _token(self, headers: dict[bytes, bytes]) -> ApiToken | None:
        scheme, _, value = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        presented = value.strip()
        if scheme.lower() != "bearer" or not presented:
            return None
        token = await self._tokens.authenticate(presented)
        return token if token is not None and token.scope.allows(SCOPE) else None

    async def _enqueue(
        self, scope: Scope, send: Send, name: str, token: ApiToken, body: object
    ) -> int:
        try:
            done = await enqueue_plain(self._services, name, token, body)  # type: ignore[arg-type]
        except Exception as exc:
            return await _answer_error(scope, send, exc)
        data = json.dumps(done, **_COMPACT).encode()  # type: ignore[arg-type]
        length = (b"content-length", str(len(data)).encode())
        await send({"type": "http.response.start", "status": 201, "headers": [*_HEADERS, length]})
        await send({"type": "http.response.body", "body": data})
        return 201


async def _answer_error(scope: Scope, send: Send, exc: Exception) -> int:
    """Answer ``exc`` as the app's exception handlers do (its most specific one)."""
    handlers = scope["app"].exception_handlers
    handler = next(
        (handlers[cls] for cls in type(exc).__mro__ if cls in handlers), handlers[Exception]
    )
    request = Request(scope)
    response = await handler(request, exc)
    await response(scope, _no_body, send)
    return int(response.status_code)


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


#: The headers the fast path reads; a request repeating one goes down the stack.
_READ = frozenset({b"authorization", b"content-type", b"content-length", b"idempotency-key"})


def _headers(scope: Scope) -> dict[bytes, bytes] | None:
    """The headers the fast path reads (names are lowercase in ASGI), or None if one of them
    is repeated (the stack reads the first; which one counts is its business)."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in _READ:
            if name in found:
                return None
            found[name] = value
    return found


def _length(headers: dict[bytes, bytes]) -> int:
    try:
        return int(headers.get(b"content-length", b"0"))
    except ValueError:
        return 0


async def _read(receive: Receive, limit: int) -> tuple[list[bytes], bool]:
    """The body's chunks, and whether that is all of it: not when it grew past ``limit``
    (reading stops after the chunk that crossed it) or the client went away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return chunks, False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return chunks, False
        if not message.get("more_body", False):
            return chunks, True


def _replay(chunks: list[bytes], whole: bool, receive: Receive) -> Receive:
    """``receive`` as it was before the fast path read ``chunks`` from it."""
    left = list(chunks)

    async def replay() -> Message:
        if left:
            body = left.pop(0)
            more = bool(left) or not whole
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay
