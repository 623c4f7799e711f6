"""Exception handlers: every error leaves the API as ``{"error": {code, message, field}}``.

Domain errors map to 422/404/409; pydantic's request errors to 422 with the first problem's
dotted path (the task kind's tag is dropped from it, so a path reads ``task.argv``); a database
that does not answer (restarting, cut off) to a 503 with ``Retry-After``, since the same request
may well succeed a moment later; anything unexpected to a 500 that reveals nothing (and is
logged).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tickwork.api.schemas.error import ErrorDetail, ErrorItem, ErrorRead
from tickwork.core.errors import Conflict, NotFound, StoreUnavailable, ValidationError
from tickwork.core.model import CallbackEvent, TaskKind

log = logging.getLogger("tickwork.api")

#: Where a request value came from; not part of the field path a user sees.
_LOC_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})
_TASK_TAGS = frozenset(k.value for k in TaskKind)
_HOOK_TAGS = frozenset({TaskKind.HTTP.value, TaskKind.PYTHON.value})
_EVENTS = frozenset(e.value for e in CallbackEvent)
_TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
#: Seconds a client is asked to wait before trying again while the database does not answer.
RETRY_AFTER = 1


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error the same JSON shape."""
    app.add_exception_handler(ValidationError, _domain_validation)
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(Conflict, _conflict)
    app.add_exception_handler(StoreUnavailable, _store_unavailable)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    details: list[ErrorItem] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON error in the API's one shape."""
    body = ErrorRead(error=ErrorDetail(code=code, message=message, field=field, details=details))
    return JSONResponse(
        body.model_dump(mode="json", exclude_none=True), status_code=status, headers=headers
    )


def dotted(loc: Sequence[str | int]) -> str | None:
    """``("body", "jobs", 3, "task", "shell", "argv")`` → ``jobs[3].task.argv``; the same for
    a callback's kind (``callbacks.on_failure.http.url`` → ``callbacks.on_failure.url``)."""
    path = ""
    prev: str | int | None = None
    for part in loc:
        is_tag = (part in _TASK_TAGS and (prev == "task" or isinstance(prev, int))) or (
            part in _HOOK_TAGS and prev in _EVENTS
        )
        if (prev is None and part in _LOC_SOURCES) or is_tag:
            prev = part
            continue
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
        prev = part
    return path or None


async def _domain_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ValidationError)
    return error_response(422, "validation_error", exc.reason, exc.field)


async def _not_found(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, NotFound)
    return error_response(404, "not_found", f"no {exc.kind} {exc.key!r}", exc.kind)


async def _conflict(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Conflict)
    return error_response(409, "conflict", exc.reason, exc.field)


async def _store_unavailable(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StoreUnavailable)
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    message = "the database does not answer; try again shortly"
    return error_response(503, "unavailable", message, headers={"Retry-After": str(RETRY_AFTER)})


async def _request_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    items = [_item(e) for e in exc.errors()]
    first = items[0] if items else ErrorItem(field=None, message="invalid request")
    return error_response(422, "validation_error", first.message, first.field, items)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    headers = dict(exc.headers or {})
    allowed = _allowed_methods(request) if exc.status_code == 405 else None
    if allowed:
        headers["Allow"] = ", ".join(allowed)
    return error_response(exc.status_code, code, str(exc.detail), headers=headers)


def _allowed_methods(request: Request) -> list[str] | None:
    """The methods of the documented path the request's path is (``None``: not documented).

    Starlette's 405 names the methods of one route only, but ``GET /api/v1/jobs`` and
    ``POST /api/v1/jobs`` live in different routers. As in OpenAPI, a concrete path wins over
    a templated one: ``/api/v1/jobs/batch`` is itself, not ``/api/v1/jobs/{name}``.
    """
    segments = request.scope["path"].split("/")
    best: tuple[int, dict[str, Any]] | None = None
    for template, item in request.app.openapi()["paths"].items():
        parts = template.split("/")
        if len(parts) != len(segments) or not all(
            part == seg or (part.startswith("{") and seg)
            for part, seg in zip(parts, segments, strict=True)
        ):
            continue
        params = sum(part.startswith("{") for part in parts)
        if best is None or params < best[0]:
            best = (params, item)
    if best is None:
        return None
    return [method for method in _METHODS if method.lower() in best[1]]


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "internal error; see the server log")


def _item(error: Any) -> ErrorItem:
    loc: tuple[str | int, ...] = tuple(error.get("loc", ()))
    if loc[-1:] == ("[key]",):  # a bad key of a map: name the map, not the key itself
        loc = loc[:-2]
    field = dotted(loc)
    if error.get("type") in _TAG_ERRORS:
        tags = _HOOK_TAGS if loc and loc[-1] in _EVENTS else _TASK_TAGS
        field = f"{field}.kind" if field else "kind"
        return ErrorItem(field=field, message=f"must be one of: {', '.join(sorted(tags))}")
    if error.get("type") == "json_invalid":
        return ErrorItem(field=None, message=f"malformed JSON body: {error.get('msg')}")
    return ErrorItem(field=field, message=str(error.get("msg", "invalid value")))
