"""The task queue's hot route, ``POST /api/v1/jobs/{name}/runs``, without FastAPI's request
solving for the requests that need none of it.

FastAPI's handler reads the body, then solves the route's dependencies (the router's
``requires`` auth check, the path parameter, the body field) through its generic machinery:
about a third of the route's API CPU in a profile of one enqueue. ``HotRoute`` keeps the route
an ordinary ``APIRoute`` (same match, middleware, exception handlers and OpenAPI document) but
answers a *plain* request itself: no query string, a bearer token that authenticates with the
route's scope, and either no body or a JSON object that ``EnqueueIn`` accepts. Anything else
(bad or missing token, a query string, a body FastAPI would refuse or read otherwise) goes to
FastAPI's own handler, which answers it exactly as before: the lean path only ever accepts
what FastAPI accepts, and both call ``enqueue_one``.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request, Response, status
from pydantic import ValidationError as PydanticError

from tickwork.api.access import JobAction, job_check
from tickwork.api.auth import AuthError, authenticate, bearer_of
from tickwork.api.deps import services_of
from tickwork.api.idempotency import (
    Handler,
    IdempotencyKey,
    IdempotentRoute,
    json_response,
    pending_key,
    receipt_of,
)
from tickwork.api.schemas.enqueue import EnqueuedRead, EnqueueIn
from tickwork.api.text import NUL
from tickwork.app.services import Services
from tickwork.ports import ApiToken, Scope

#: The scope of the write router the route is in (``create_app``; a test holds them equal).
SCOPE = Scope.WRITE
#: The one content type the lean path reads; FastAPI's handler takes ``+json`` and the rest.
_JSON = "application/json"


async def enqueue_one(
    request: Request, name: str, token: ApiToken, body: EnqueueIn | None
) -> Response:
    """Enqueue one run of job ``name``: the route's work, whichever handler read the request."""
    done = await enqueue_plain(services_of(request), name, token, body, pending_key(request))
    # The answer's JSON written directly: no response-model pass for two fields of ids.
    return json_response(done, status.HTTP_201_CREATED)


async def enqueue_plain(
    services: Services,
    name: str,
    token: ApiToken,
    body: EnqueueIn | None,
    key: IdempotencyKey | None = None,
) -> dict[str, Any]:
    """The enqueue itself (also ``fast_path``'s): the answer's JSON object."""
    item = (body or EnqueueIn()).to_item(services.now())
    receipt = receipt_of(key, EnqueuedRead.plain)
    check = job_check(token, JobAction.RUN)
    done = await services.enqueue_many(name, [item], receipt=receipt, batch=False, check=check)
    return EnqueuedRead.plain(done)


class HotRoute(IdempotentRoute):
    """The enqueue route: the lean handler in front of FastAPI's (see the module's doc)."""

    def request_handler(self) -> Handler:
        return lean_enqueue(super().request_handler())


def lean_enqueue(full: Handler) -> Handler:
    """Answer a plain enqueue request; hand any other to ``full`` (FastAPI's handler)."""

    async def handler(request: Request) -> Response:
        name: str = request.path_params["name"]
        if request.scope.get("query_string") or NUL in name:
            return await full(request)  # query parameters are checked (repeats, NUL) there
        token = await _token(request)
        if token is None:
            return await full(request)  # answers the 401 or 403
        body = await _body(request)
        if body is _IRREGULAR:
            return await full(request)  # answers the 4xx naming the field
        return await enqueue_one(request, name, token, body)

    return handler


_IRREGULAR: Any = object()
#: What ``plain_body`` returns for a body the lean path does not read.
IRREGULAR: Any = _IRREGULAR


async def _token(request: Request) -> ApiToken | None:
    try:
        token = await authenticate(request, bearer_of(request))
    except AuthError:
        return None
    return token if token.scope.allows(SCOPE) else None


async def _body(request: Request) -> EnqueueIn | None:
    return plain_body(await request.body(), request.headers.get("content-type"))


def plain_body(raw: bytes, content_type: str | None) -> EnqueueIn | None:
    """The body as FastAPI would read it, or ``IRREGULAR`` for any it reads otherwise."""
    if not raw:
        return None  # FastAPI: no body, the parameter's default
    if content_type != _JSON:
        return _IRREGULAR  # type: ignore[no-any-return]
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            return _IRREGULAR  # type: ignore[no-any-return]
        return EnqueueIn.model_validate(data)
    except (ValueError, RecursionError, PydanticError):  # JSON, UTF-8, nesting, fields:
        return _IRREGULAR  # type: ignore[no-any-return]
