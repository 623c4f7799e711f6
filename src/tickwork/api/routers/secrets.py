"""Secrets (admin only): set, list, delete. No route ever answers a value."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response, status

from tickwork.api.auth import security_of
from tickwork.api.schemas.secrets import SecretIn, SecretListRead, SecretRead
from tickwork.app.secrets import SecretService
from tickwork.security.secrets import SecretKeyError

router = APIRouter(tags=["secrets"])


def _secrets(request: Request) -> SecretService:
    return security_of(request).secrets


@router.put(
    "/secrets/{name}",
    responses={201: {"model": SecretRead, "description": "A new secret."}},
)
async def set_secret(name: str, body: SecretIn, request: Request, response: Response) -> SecretRead:
    """Create or replace a secret; tasks refer to it as `{"$secret": "NAME"}`. The value
    is encrypted at rest and resolved only by workers, right before a task runs."""
    service = _secrets(request)
    try:
        created = await service.set(name, body.value)
    except SecretKeyError as e:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(e)) from None
    if created:
        response.status_code = status.HTTP_201_CREATED
    (info,) = [s for s in await service.list_all() if s.name == name]
    return SecretRead.model_validate(info)


@router.get("/secrets")
async def list_secrets(request: Request) -> SecretListRead:
    """Every secret by name, with when it was set (never a value)."""
    infos = await _secrets(request).list_all()
    return SecretListRead(secrets=[SecretRead.model_validate(s) for s in infos])


@router.delete("/secrets/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_secret(name: str, request: Request) -> None:
    """Delete a secret; tasks that refer to it fail their next attempt, naming it."""
    await _secrets(request).delete(name)
