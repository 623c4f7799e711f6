"""The audit log: who did what, when, with which token (API and dashboard)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from tickwork.api.deps import ServicesDep
from tickwork.ports.web import AuditPage
from tickwork.security.masking import mask_json

router = APIRouter(tags=["audit"])


class AuditEntryRead(BaseModel):
    id: str
    at: datetime
    token_name: str = Field(description="The name of the token that acted.")
    token_id: str
    source: str = Field(description="`api` or `dashboard`.")
    action: str
    target: str
    outcome: str = Field(description="`ok`, or `forbidden`/`refused` for a refused action.")
    detail: dict[str, Any]


class AuditPageRead(BaseModel):
    entries: list[AuditEntryRead]
    next_cursor: str | None

    @classmethod
    def of(cls, page: AuditPage) -> AuditPageRead:
        return cls(
            entries=[
                AuditEntryRead(
                    id=e.id,
                    at=e.at,
                    token_name=e.token_name,
                    token_id=e.token_id,
                    source=e.source,
                    action=e.action,
                    target=e.target,
                    outcome=e.outcome,
                    detail=mask_json(dict(e.detail)),  # it may quote params or configs
                )
                for e in page.entries
            ],
            next_cursor=page.next_cursor,
        )


@router.get("/audit")
async def list_audit(
    services: ServicesDep,
    token: Annotated[str | None, Query(description="Only this token name's actions.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the last page.")] = None,
) -> AuditPageRead:
    """Actions taken through the API and the dashboard, newest first."""
    page = await services.store.list_audit(limit=limit, cursor=cursor, token_name=token)
    return AuditPageRead.of(page)
