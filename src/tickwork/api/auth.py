"""Bearer-token auth: deny by default, scopes ``read`` < ``write`` < ``admin``.

``create_app`` puts ``requires(scope)`` on every router but ``health``; a route that needs
more than its router (a job with ``shell`` or ``python`` tasks) calls ``require_task_scope``.
Failures leave in the API's one error shape: 401 with ``WWW-Authenticate: Bearer`` for a
missing or bad token, 403 for too small a scope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.params import Depends as DependsParam
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tickwork.api.errors import error_response
from tickwork.app.secrets import SecretService
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.core.model import Callbacks, Task, TaskKind
from tickwork.ports import ApiToken, IdempotencyStore, Scope

#: Task kinds that run code of the job's author on workers: only ``admin`` may save them.
CODE_TASKS = frozenset({TaskKind.SHELL, TaskKind.PYTHON})
DEFAULT_IDEMPOTENCY_TTL = timedelta(hours=24)

_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer tw_...`")


@dataclass(frozen=True, slots=True)
class Security:
    """What the API needs to authenticate requests and remember idempotency keys."""

    tokens: TokenService
    keys: IdempotencyStore
    secrets: SecretService
    idempotency_ttl: timedelta = DEFAULT_IDEMPOTENCY_TTL
    clock: Callable[[], datetime] = utc_now

    @classmethod
    def over(cls, services: Services, **options: Any) -> Security:
        """Tokens, keys and secrets kept in the services' store; ``cipher`` (a
        ``SecretCipher``, default none) encrypts secrets."""
        clock = options.pop("clock", utc_now)
        secrets = SecretService(services.store, options.pop("cipher", None), clock)
        tokens = TokenService(services.store, clock)
        return cls(tokens, services.store, secrets, clock=clock, **options)


class AuthError(Exception):
    """401 (who are you?) or 403 (not allowed)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def security_of(request: Request) -> Security:
    security: Security = request.app.state.security
    return security


async def authenticate(request: Request, presented: str | None) -> ApiToken:
    """The token of this request (looked up once per request), or ``AuthError`` 401."""
    known: ApiToken | None = getattr(request.state, "token", None)
    if known is not None:
        return known
    if not presented:
        raise AuthError(401, "unauthorized", "this route needs `Authorization: Bearer <token>`")
    token = await security_of(request).tokens.authenticate(presented)
    if token is None:
        raise AuthError(401, "unauthorized", "the bearer token is unknown or revoked")
    request.state.token = token
    return token


def bearer_of(request: Request) -> str | None:
    """The token in the ``Authorization: Bearer`` header, if any."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def requires(scope: Scope, then: Callable[[Request], None] | None = None) -> DependsParam:
    """A dependency that lets only tokens with ``scope`` (or a larger one) through, then runs
    ``then`` (a check every route of the router gets). One dependency rather than two: FastAPI
    spends tens of µs per dependency per request."""

    async def check(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> ApiToken:
        token = await authenticate(request, credentials.credentials if credentials else None)
        require_scope(token, scope)
        if then is not None:
            then(request)
        return token

    dependency: DependsParam = Depends(check)
    return dependency


def require_scope(token: ApiToken, scope: Scope, why: str = "") -> None:
    if not token.scope.allows(scope):
        because = f" {why}" if why else ""
        article = "an" if str(scope)[:1] in "aeiou" else "a"
        raise AuthError(403, "forbidden", f"needs {article} `{scope}` token{because}")


def require_task_scope(token: ApiToken, kinds: Iterable[TaskKind]) -> None:
    """``admin`` for jobs with ``shell`` or ``python`` tasks: they run code on workers."""
    code = sorted(CODE_TASKS.intersection(kinds))
    if code:
        require_scope(token, Scope.ADMIN, f"to save {' or '.join(code)} tasks")


def require_job_scope(
    token: ApiToken, tasks: Iterable[Task], job_callbacks: Iterable[Callbacks] = ()
) -> None:
    """``admin`` for jobs that run code on workers: ``shell`` or ``python`` tasks, or
    ``python`` callbacks (of a task or of the job)."""
    tasks = list(tasks)
    require_task_scope(token, (t.kind for t in tasks))
    hooks = [*(t.callbacks for t in tasks), *job_callbacks]
    if any(hook.kind in CODE_TASKS for callbacks in hooks for hook in callbacks.values()):
        require_scope(token, Scope.ADMIN, "to save python callbacks")


async def current_token(request: Request) -> ApiToken:
    """The authenticated token (the router's ``requires`` has run already)."""
    return await authenticate(request, bearer_of(request))


TokenDep = Annotated[ApiToken, Depends(current_token)]


def install_auth(app: FastAPI, security: Security) -> None:
    """Keep ``security`` on the app and answer ``AuthError`` in the one error shape."""
    app.state.security = security
    app.add_exception_handler(AuthError, _auth_error)


async def _auth_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AuthError)
    response = error_response(exc.status, exc.code, exc.message)
    if exc.status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response
