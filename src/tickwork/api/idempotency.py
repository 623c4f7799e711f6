"""``Idempotency-Key`` on job create (single and batch), trigger and enqueue.

The same key with the same request (method, path, query and body bytes) replays the first
response, status and body; with a different request it is a 409. Keys are kept per token
(two clients never collide) and expire after ``Security.idempotency_ttl``.

A key is recorded by the transaction of the write it guards, together with the response:
the route passes ``IdempotencyKey.receipt(render)`` to its service, which renders the
response from what it is about to write, and the store inserts the key first in that same
transaction. A write that fails or never runs leaves no key; a committed one always has its
key and response. Of concurrent requests with one key, the store lets one write commit and
the others find its record (``KeyTaken``) and replay it. The first response is the stored
one, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.routing import APIRoute

from tickwork.api.auth import Security, authenticate, bearer_of, security_of
from tickwork.api.text import NUL, NUL_MESSAGE
from tickwork.app.services import Receipt
from tickwork.core.errors import Conflict, ValidationError
from tickwork.ports import IdempotencyRecord, KeyReceipt, KeyTaken

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
PURGE_EVERY = 60.0  # seconds between sweeps of expired keys, per process
#: Endpoint names of the routes that honour the header.
IDEMPOTENT_ROUTES = frozenset(
    {"create_job", "create_jobs", "trigger_job", "enqueue_run", "enqueue_runs"}
)

_HEADER_DOC: dict[str, Any] = {
    "name": HEADER,
    "in": "header",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH},
    "description": "Repeat the request safely: the same key and body replay the first "
    "response; the same key with another body is a 409. Kept 24 h by default.",
}
_JSON = "application/json"
#: How FastAPI's JSONResponse writes a body.
_COMPACT: dict[str, Any] = {"ensure_ascii": False, "allow_nan": False, "separators": (",", ":")}

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
T = TypeVar("T")


@dataclass
class IdempotencyKey:
    """The ``Idempotency-Key`` of a request whose write has not run yet."""

    token_id: str
    key: str
    request_hash: str
    status: int
    now: datetime
    expires_at: datetime
    recorded: KeyReceipt | None = None

    def receipt(self, render: Callable[[T], Any]) -> Receipt[T]:
        """What the service calls with the records it is about to write: ``render`` turns
        them into the response body, stored with the write."""

        def make(result: T) -> KeyReceipt:
            body = json.dumps(jsonable_encoder(render(result)), **_COMPACT)
            self.recorded = KeyReceipt(
                self.token_id, self.key, self.request_hash, self.status, body, self.now,
                self.expires_at,
            )  # fmt: skip
            return self.recorded

        return make


def pending_key(request: Request) -> IdempotencyKey | None:
    """The pending key of this request (None without the header)."""
    pending: IdempotencyKey | None = getattr(request.state, "idempotency_key", None)
    return pending


async def idempotency_key(request: Request) -> IdempotencyKey | None:
    """``pending_key`` as a dependency."""
    return pending_key(request)


IdempotencyKeyDep = Annotated[IdempotencyKey | None, Depends(idempotency_key)]


def receipt_of(key: IdempotencyKey | None, render: Callable[[T], Any]) -> Receipt[T] | None:
    """``key.receipt(render)``, or None for a request without a key."""
    return None if key is None else key.receipt(render)


class IdempotentRoute(APIRoute):
    """An ``APIRoute`` that honours ``Idempotency-Key`` on the routes in IDEMPOTENT_ROUTES."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        if self.name in IDEMPOTENT_ROUTES:
            extra = self.openapi_extra or {}
            self.openapi_extra = {**extra, "parameters": [_HEADER_DOC]}

    def request_handler(self) -> Handler:
        """The handler of a request whose key (if any) is pending: FastAPI's."""
        handler: Handler = super().get_route_handler()
        return handler

    def get_route_handler(self) -> Handler:
        handler = self.request_handler()
        if self.name not in IDEMPOTENT_ROUTES:
            return handler
        status = self.status_code or 200

        async def idempotent(request: Request) -> Response:
            key = request.headers.get(HEADER)
            if key is None:
                return await handler(request)
            return await _once(request, key, status, handler)

        return idempotent


async def _once(request: Request, key: str, status: int, handler: Handler) -> Response:
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationError(HEADER, f"must be 1 to {MAX_KEY_LENGTH} characters")
    if NUL in key:
        raise ValidationError(HEADER, NUL_MESSAGE)
    token = await authenticate(request, bearer_of(request))
    security = security_of(request)
    digest = await _request_hash(request)
    now = security.clock()
    await _sweep(request, security)
    held = await security.keys.get_key(token.id, key, now)
    if held is None:
        pending = IdempotencyKey(token.id, key, digest, status, now, now + security.idempotency_ttl)
        request.state.idempotency_key = pending
        try:
            return _first(await handler(request), pending)
        except KeyTaken as taken:  # a concurrent request with this key committed first
            held = taken.held
    return _replay(held, digest)


def json_response(payload: Any, status: int) -> Response:
    """``payload`` (plain JSON values) as FastAPI's JSONResponse would write it."""
    return Response(json.dumps(payload, **_COMPACT).encode(), status, media_type=_JSON)


def _first(response: Response, pending: IdempotencyKey) -> Response:
    """The response of the request that wrote: the stored body, as every replay sends it."""
    recorded = pending.recorded
    if recorded is None or not 200 <= response.status_code < 300:
        return response
    return Response(recorded.body, recorded.status, media_type=_JSON)


def _replay(held: IdempotencyRecord, digest: str) -> Response:
    if held.request_hash != digest:
        raise Conflict(HEADER, "this key was used with a different request; use a new key")
    if held.status is None or held.body is None:
        raise Conflict(HEADER, "a request with this key is still in progress; retry later")
    return Response(held.body, held.status, {"Idempotent-Replayed": "true"}, _JSON)


async def _request_hash(request: Request) -> str:
    digest = hashlib.sha256()
    for part in (request.method, request.url.path, request.url.query):
        digest.update(part.encode() + b"\0")
    digest.update(await request.body())
    return digest.hexdigest()


async def _sweep(request: Request, security: Security) -> None:
    """Purge expired keys, at most once a minute per app (opportunistic, no extra loop)."""
    last: float = getattr(request.app.state, "idempotency_swept", 0.0)
    if time.monotonic() - last < PURGE_EVERY:
        return
    request.app.state.idempotency_swept = time.monotonic()
    await security.keys.purge_keys(security.clock())
