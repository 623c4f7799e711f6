"""Liveness: outside ``/api/v1`` so load balancers need no version."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.exceptions import HTTPException as StarletteHTTPException

from tickwork import __version__
from tickwork.api.deps import ServicesDep
from tickwork.api.schemas import ErrorRead, HealthRead

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> HealthRead:
    """The process is up and serving requests."""
    return HealthRead(status="ok", version=__version__)


@router.get(
    "/readyz",
    responses={503: {"model": ErrorRead, "description": "The store does not answer."}},
)
async def readyz(services: ServicesDep) -> HealthRead:
    """The process can serve traffic: its store answers."""
    if not await services.ready():
        raise StoreUnavailable()
    return HealthRead(status="ready", version=__version__)


class StoreUnavailable(StarletteHTTPException):
    def __init__(self) -> None:
        super().__init__(503, "the store does not answer")
