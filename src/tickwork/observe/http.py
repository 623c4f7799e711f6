"""``/metrics``, ``/livez`` and ``/readyz`` over HTTP: a small ASGI app for the scheduler's and
the worker's ``--metrics-port``, and the same handlers for the API app."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.observe import metrics as m
from tickwork.observe.facts import FactsSource, SnapshotCollector
from tickwork.observe.health import Health, Verdict


class MetricsEndpoint:
    """Renders tickwork's registry and, while ``exports_facts()``, the database facts."""

    def __init__(
        self, facts: FactsSource | None = None, exports_facts: Callable[[], bool] = lambda: True
    ) -> None:
        self._facts = facts
        self._exports_facts = exports_facts

    async def render(self) -> bytes:
        text = generate_latest(m.REGISTRY)
        if self._facts is not None and self._exports_facts():
            snap = await self._facts.snapshot()
            registry = CollectorRegistry(auto_describe=False)
            registry.register(SnapshotCollector(snap, datetime.now(UTC)))
            text += generate_latest(registry)
        return text

    async def respond(self, _request: Request) -> Response:
        return Response(await self.render(), media_type=CONTENT_TYPE_LATEST)


def verdict_response(verdict: Verdict) -> JSONResponse:
    return JSONResponse(verdict.body, status_code=verdict.status_code)


def probe_routes(health: Health, metrics: MetricsEndpoint) -> list[Route]:
    async def livez(_request: Request) -> Response:
        return verdict_response(health.live())

    async def readyz(_request: Request) -> Response:
        return verdict_response(await health.ready())

    return [
        Route("/metrics", metrics.respond, methods=["GET"]),
        Route("/livez", livez, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]


def probe_app(health: Health, metrics: MetricsEndpoint) -> Starlette:
    """The app of a scheduler's or worker's metrics port."""
    return Starlette(routes=probe_routes(health, metrics))


class RequestTimer:
    """ASGI middleware: ``tickwork_http_request_duration_seconds`` by route template (never
    the raw path: ids in paths would make a series per run), method and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self._observe(scope, status, time.perf_counter() - start)

    def _observe(self, scope: Scope, status: int, seconds: float) -> None:
        route = scope.get("route")
        observe_request(
            getattr(route, "path", None) or "unmatched", scope["method"], status, seconds
        )


#: ``HTTP_SECONDS``' label children, looked up once: ``labels()`` costs more than the observation.
_CHILDREN: dict[tuple[str, str, int], Any] = {}


def observe_request(template: str, method: str, status: int, seconds: float) -> None:
    """Record one request's duration under its route's ``template`` (``RequestTimer``'s)."""
    key = (template, method, status)
    child = _CHILDREN.get(key)
    if child is None:
        child = _CHILDREN[key] = m.HTTP_SECONDS.labels(template, method, str(status))
    child.observe(seconds)
