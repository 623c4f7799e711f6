"""Dashboard sign-in: a pasted token becomes a session kept in the database.

The browser holds only a random secret in an HttpOnly, SameSite=Strict cookie (Secure over
https); the database holds its SHA-256, the token it acts as and the session's CSRF token.
The token itself never reaches a URL, a page or a cookie. Every request looks the token up
again, so revoking it ends its sessions at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from starlette.requests import Request
from starlette.responses import Response

from tickwork.api.auth import Security
from tickwork.ports import ApiToken, Store
from tickwork.ports.web import WebSession

COOKIE = "tw_session"
SIGNIN_COOKIE = "tw_signin"  # the sign-in form's own CSRF token (double submit)
SESSION_TTL = timedelta(hours=12)


@dataclass(frozen=True, slots=True)
class Visitor:
    """Who is asking: the session and the token it acts as."""

    session: WebSession
    token: ApiToken


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def visitor(request: Request, store: Store, now: datetime) -> Visitor | None:
    """The signed-in visitor of ``request``; None without a live session and token."""
    secret = request.cookies.get(COOKIE)
    if not secret or len(secret) > 100:
        return None
    session = await store.get_web_session(_digest(secret), now)
    if session is None:
        return None
    token = await store.get_token(session.token_id)
    if token is None or token.revoked_at is not None:
        return None
    return Visitor(session, token)


async def sign_in(
    security: Security, store: Store, presented: str, now: datetime
) -> tuple[str, ApiToken] | None:
    """A new session for a valid token: (cookie secret, token); None for a bad token."""
    token = await security.tokens.authenticate(presented.strip())
    if token is None:
        return None
    secret = secrets.token_urlsafe(32)
    session = WebSession(
        id=_digest(secret),
        token_id=token.id,
        csrf=secrets.token_urlsafe(24),
        created_at=now,
        expires_at=now + SESSION_TTL,
    )
    await store.create_web_session(session)
    return secret, token


async def sign_out(request: Request, store: Store, now: datetime) -> None:
    secret = request.cookies.get(COOKIE)
    if secret:
        await store.end_web_session(_digest(secret), now)


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


def csrf_ok(expected: str, given: object) -> bool:
    return isinstance(given, str) and hmac.compare_digest(expected, given)


def new_signin_nonce() -> str:
    return secrets.token_urlsafe(24)
