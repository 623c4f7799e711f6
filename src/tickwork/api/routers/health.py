"""Health and metrics: outside ``/api/v1`` so load balancers and Prometheus need no version,
and public (no token), like every probe.

``/healthz``: the process serves HTTP (and says its version and the database's schema
revision). ``/livez``: its loops are alive. ``/readyz``: it can do its job now (the database
answers; 503 with a JSON reason otherwise). ``/metrics``: Prometheus text.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tickwork import __version__
from tickwork.api.deps import ServicesDep
from tickwork.api.schemas import HealthRead
from tickwork.observe.health import Health
from tickwork.observe.http import MetricsEndpoint

router = APIRouter(tags=["health"])

_PROBE: dict[int | str, dict[str, Any]] = {
    503: {"description": "Not alive or not ready: `status` and `reason` say why."}
}


@router.get("/healthz")
async def healthz(services: ServicesDep) -> HealthRead:
    """The process is up and serving requests; its version and the schema revision."""
    try:
        revision = await services.store.schema_revision()
    except Exception:  # /healthz answers whatever the database does; /readyz judges it
        revision = None
    return HealthRead(status="ok", version=__version__, schema_revision=revision)


@router.get("/livez", responses=_PROBE)
async def livez(request: Request) -> JSONResponse:
    """The process's loops are alive (for `tickwork up`: its scheduler and worker pool)."""
    verdict = _health(request).live()
    return JSONResponse(verdict.body, status_code=verdict.status_code)


@router.get("/readyz", responses=_PROBE)
async def readyz(request: Request) -> JSONResponse:
    """The process can serve traffic: its store answers."""
    verdict = await _health(request).ready()
    return JSONResponse(verdict.body, status_code=verdict.status_code)


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def metrics(request: Request) -> Response:
    """Prometheus metrics of this process (`tickwork up`: with the database's facts)."""
    endpoint: MetricsEndpoint = request.app.state.metrics
    return Response(await endpoint.render(), media_type=CONTENT_TYPE_LATEST)


def _health(request: Request) -> Health:
    health: Health = request.app.state.health
    return health
