"""``GET /status``: the cluster's state for ``tickwork status`` (read scope)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from tickwork.api.schemas.status import StatusRead
from tickwork.app.status import StatusService

router = APIRouter(tags=["status"])


def status_of(request: Request) -> StatusService:
    service: StatusService = request.app.state.status
    return service


@router.get("/status")
async def status(request: Request) -> StatusRead:
    """Leader and standbys, workers by queue with busy and free slots, queue depths and the
    oldest wait, and warnings (a queue with work and no worker, no leader, missed fires,
    dead letters)."""
    return StatusRead.of(await status_of(request).report())
