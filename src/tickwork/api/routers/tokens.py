"""Token management (admin only): create, list, revoke."""

from __future__ import annotations

from fastapi import APIRouter, Request, status

from tickwork.api.auth import security_of
from tickwork.api.schemas.tokens import TokenCreate, TokenCreated, TokenListRead, TokenRead

router = APIRouter(tags=["tokens"])


@router.post("/tokens", status_code=status.HTTP_201_CREATED)
async def create_token(body: TokenCreate, request: Request) -> TokenCreated:
    """Create a token. Its secret is in this response only."""
    issued = await security_of(request).tokens.create(body.name, body.scope)
    shown = TokenRead.model_validate(issued.token).model_dump()
    return TokenCreated(**shown, secret=issued.secret)


@router.get("/tokens")
async def list_tokens(request: Request) -> TokenListRead:
    """Every token, revoked ones included, oldest first."""
    tokens = await security_of(request).tokens.list()
    return TokenListRead(tokens=[TokenRead.model_validate(t) for t in tokens])


@router.delete("/tokens/{token}")
async def revoke_token(token: str, request: Request) -> TokenRead:
    """Revoke a live token by id or name; it stops working within about a second."""
    return TokenRead.model_validate(await security_of(request).tokens.revoke(token))
