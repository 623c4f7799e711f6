"""The HTTP API: ``create_app(services)`` builds the FastAPI application."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, FastAPI
from fastapi_offline import FastAPIOffline
from starlette.types import ASGIApp

from tickwork import __version__
from tickwork.api.audit import AuditTrail
from tickwork.api.auth import Security, install_auth, requires
from tickwork.api.deps import check_parameters
from tickwork.api.errors import install_error_handlers
from tickwork.api.fast_path import EnqueueFastPath
from tickwork.api.limits import DEFAULT_MAX_BODY, BodyLimit
from tickwork.api.routers import audit, backfills, pools, read, secrets, tokens, why, write
from tickwork.api.routers import health as health_routes
from tickwork.api.routers import status as status_routes
from tickwork.api.schemas import ErrorRead
from tickwork.api.text import mark_parameters
from tickwork.app.services import Services
from tickwork.app.status import StatusService
from tickwork.observe import tracing
from tickwork.observe.facts import FactsSource
from tickwork.observe.health import Health
from tickwork.observe.http import MetricsEndpoint, RequestTimer
from tickwork.ports import Scope

API_PREFIX = "/api/v1"
DOCS_URL = f"{API_PREFIX}/docs"

#: Which routers an app serves: ``write`` (jobs, runs' actions, tokens, pool changes), ``read``
#: (search, detail, logs, previews, pools), or ``all``. Health checks are in every one.
Role = Literal["write", "read", "all"]

#: Documented on every API route: the one error shape.
_ERRORS: dict[int | str, dict[str, object]] = {
    400: {"model": ErrorRead, "description": "A body that cannot be read (not UTF-8, say)."},
    401: {"model": ErrorRead, "description": "No bearer token, or an unknown or revoked one."},
    403: {"model": ErrorRead, "description": "The token's scope is too small."},
    404: {"model": ErrorRead, "description": "No such job, run, task run or pool."},
    409: {"model": ErrorRead, "description": "Conflicts with stored state."},
    413: {"model": ErrorRead, "description": "The request body is over the size limit."},
    422: {"model": ErrorRead, "description": "Invalid input; `field` names it."},
}


def create_app(
    services: Services,
    *,
    security: Security | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    role: Role = "all",
    health: Health | None = None,
    metrics: MetricsEndpoint | None = None,
    status: StatusService | None = None,
) -> FastAPI:
    """The API over ``services``: write and read routers under ``/api/v1`` (only those of
    ``role``), plus ``/healthz``.

    Every route but ``/healthz`` and ``/readyz`` needs a bearer token (``security``; by
    default, tokens and idempotency keys in the services' store): ``read`` routes a
    ``read`` token, ``write`` routes a ``write`` token, token management and pool changes an
    ``admin`` one.

    The OpenAPI document is at ``/api/v1/openapi.json``; Swagger UI at ``/api/v1/docs``, with
    its assets served by the app itself from the ``fastapi-offline`` package (no CDN: tickwork
    works offline). Both are public, like the health checks: they hold no data.

    ``health`` answers ``/livez`` and ``/readyz`` (default: the store answers); ``metrics``
    renders ``/metrics`` (default: this process's metrics, without the database's facts);
    ``status`` answers ``GET /api/v1/status`` (default: from the services' store).
    """
    app = FastAPIOffline(
        title="tickwork",
        version=__version__,
        summary="A distributed job scheduler: now, at and cron jobs, runs, logs.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=DOCS_URL,
        redoc_url=None,
        static_url=f"{DOCS_URL}/static",
        swagger_ui_oauth2_redirect_url=f"{DOCS_URL}/oauth2-redirect",
        # Swagger UI's default validator badge loads an image from validator.swagger.io.
        swagger_ui_parameters={"validatorUrl": None},
        # FastAPI's own OpenTelemetry server span per request (a child of the caller's
        # traceparent) when observe.tracing is on; the runs a request creates link to it.
        # Its per-dependency/endpoint spans are left out as noise. Off, it is off outright:
        # FastAPI otherwise asks OpenTelemetry's global providers (three environment reads)
        # on every request; and its metrics and logs are not ours (metrics: /metrics).
        telemetry={
            "operation_spans": False,
            "tracer_provider": tracing.provider(),
            "tracing": tracing.enabled(),
            "metrics": False,
            "logs": False,
        },
    )
    app.state.services = services
    app.state.health = health or Health(
        # Looked up when probed, not now: the OpenAPI document is built from an app
        # without a store (tests/api/schema/).
        "api",
        dependencies={"database": lambda: services.store.schema_revision()},  # noqa: PLW0108
    )
    app.state.metrics = metrics or MetricsEndpoint()
    app.state.status = status or StatusService(
        services.store, FactsSource(services.store, services.now)
    )
    for router, roles, scope in _ROUTERS:
        if role in roles:
            app.include_router(
                router,
                prefix=API_PREFIX,
                responses=_ERRORS,
                dependencies=[requires(scope, then=check_parameters)],
            )
    app.include_router(health_routes.router)
    _publish_text_rule(app)
    install_error_handlers(app)
    security = security or Security.over(services)
    install_auth(app, security)
    if role != "read":  # a read-only API writes nothing, so it has nothing to audit
        app.add_middleware(AuditTrail, store=services.store, prefix=API_PREFIX)
    # An oversize body is refused before auth, parsing or any write.
    app.add_middleware(BodyLimit, max_bytes=max_body)
    app.add_middleware(RequestTimer)
    if role != "read":  # outermost: the plain single enqueue, ahead of all of the above
        _fast_path_first(app, services, security, max_body)
    return app


def _fast_path_first(app: FastAPI, services: Services, security: Security, max_body: int) -> None:
    """Put ``EnqueueFastPath`` ahead of the whole middleware stack, Starlette's and FastAPI's
    own layers included (server errors, FastAPI's exception telemetry and body limit): a plain
    single enqueue passes none of them. The stack is built on the first request, so middleware
    added later (the dashboard's) still goes inside."""
    build = app.build_middleware_stack

    def build_middleware_stack() -> ASGIApp:
        return EnqueueFastPath(build(), services=services, security=security, max_body=max_body)

    app.build_middleware_stack = build_middleware_stack  # type: ignore[method-assign]


#: Each router, the roles that serve it and the scope its routes need. Token management and
#: changing pools (operator settings) go with the write side.
_ROUTERS: tuple[tuple[APIRouter, tuple[str, ...], Scope], ...] = (
    (write.router, ("write", "all"), Scope.WRITE),
    (read.router, ("read", "all"), Scope.READ),
    (audit.router, ("read", "all"), Scope.READ),
    (status_routes.router, ("read", "all"), Scope.READ),
    (pools.read_router, ("read", "all"), Scope.READ),
    (tokens.router, ("write", "all"), Scope.ADMIN),
    (pools.admin_router, ("write", "all"), Scope.ADMIN),
    (backfills.write_router, ("write", "all"), Scope.WRITE),
    (backfills.read_router, ("read", "all"), Scope.READ),
    (why.router, ("read", "all"), Scope.READ),
    (secrets.router, ("write", "all"), Scope.ADMIN),
)


def _publish_text_rule(app: FastAPI) -> None:
    """Let the OpenAPI document say that no parameter may hold NUL (``text``)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = mark_parameters(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
