"""Liveness: outside ``/api/v1`` so load balancers need no version."""

from __future__ import annotations

from fastapi import APIRouter

from tickwork import __version__
from tickwork.api.schemas import HealthRead

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> HealthRead:
    """The process is up and serving requests."""
    return HealthRead(status="ok", version=__version__)
