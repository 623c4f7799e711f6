"""``Idempotency-Key`` on job create (single and batch) and trigger.

The same key with the same request (method, path, query and body bytes) replays the first
response, status and body; with a different request it is a 409. Keys are kept per token
(two clients never collide) and expire after ``Security.idempotency_ttl``.

The (token, key) primary key is the lock: the key is claimed in its own transaction *before*
the work runs, so of two concurrent requests exactly one claims it and runs; the other gets
a 409 while the first is in flight and the replay afterwards. A request that fails (4xx,
5xx, exception) changed nothing, so its claim is released and the key can be used again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from tickwork.api.auth import Security, authenticate, bearer_of, security_of
from tickwork.core.errors import Conflict, ValidationError

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
PURGE_EVERY = 60.0  # seconds between sweeps of expired keys, per process
#: Endpoint names of the routes that honour the header.
IDEMPOTENT_ROUTES = frozenset({"create_job", "create_jobs", "trigger_job"})

_HEADER_DOC: dict[str, Any] = {
    "name": HEADER,
    "in": "header",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH},
    "description": "Repeat the request safely: the same key and body replay the first "
    "response; the same key with another body is a 409. Kept 24 h by default.",
}

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class IdempotentRoute(APIRoute):
    """An ``APIRoute`` that honours ``Idempotency-Key`` on the routes in IDEMPOTENT_ROUTES."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        if self.name in IDEMPOTENT_ROUTES:
            extra = self.openapi_extra or {}
            self.openapi_extra = {**extra, "parameters": [_HEADER_DOC]}

    def get_route_handler(self) -> Handler:
        handler: Handler = super().get_route_handler()
        if self.name not in IDEMPOTENT_ROUTES:
            return handler

        async def idempotent(request: Request) -> Response:
            key = request.headers.get(HEADER)
            if key is None:
                return await handler(request)
            return await _once(request, key, handler)

        return idempotent


async def _once(request: Request, key: str, handler: Handler) -> Response:
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationError(HEADER, f"must be 1 to {MAX_KEY_LENGTH} characters")
    token = await authenticate(request, bearer_of(request))
    security = security_of(request)
    digest = await _request_hash(request)
    now = security.clock()
    await _sweep(request, security)
    held = await security.keys.claim_key(token.id, key, digest, now, now + security.idempotency_ttl)
    if held is not None:
        if held.request_hash != digest:
            raise Conflict(HEADER, "this key was used with a different request; use a new key")
        if held.status is None or held.body is None:
            raise Conflict(HEADER, "a request with this key is still in progress; retry later")
        return Response(held.body, held.status, {"Idempotent-Replayed": "true"}, _JSON)
    return await _run_and_keep(request, token.id, key, handler)


_JSON = "application/json"


async def _run_and_keep(request: Request, token_id: str, key: str, handler: Handler) -> Response:
    keys = security_of(request).keys
    try:
        response = await handler(request)
    except BaseException:
        await keys.release_key(token_id, key)
        raise
    if 200 <= response.status_code < 300:
        await keys.finish_key(token_id, key, response.status_code, bytes(response.body).decode())
    else:
        await keys.release_key(token_id, key)
    return response


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
