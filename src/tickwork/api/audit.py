"""The audit trail of the API: every write that went through, with the token that made it.

A pure ASGI middleware (no ``BaseHTTPMiddleware``: it would buffer streaming responses). After
a state-changing request under ``/api/v1`` answered 2xx, it appends one entry: the route's
operation as the action, its path parameters as the target. The enqueue routes are left out:
they are the task queue's data plane (thousands a second), not operator actions.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.app.services import utc_now
from tickwork.ids import new_id
from tickwork.ports import ApiToken, Store
from tickwork.ports.web import AuditEntry

log = logging.getLogger("tickwork.api")

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Operations not audited: the task queue's hot path.
UNAUDITED = frozenset({"enqueue_run", "enqueue_runs"})


class AuditTrail:
    def __init__(self, app: ASGIApp, store: Store, prefix: str) -> None:
        self.app = app
        self.store = store
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES:
            await self.app(scope, receive, send)
            return
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        if 200 <= status < 300 and scope["path"].startswith(self.prefix):
            await self._record(scope)

    async def _record(self, scope: Scope) -> None:
        token = scope.get("state", {}).get("token")
        route = scope.get("route")
        action = getattr(getattr(route, "endpoint", None), "__name__", None) or scope["method"]
        if not isinstance(token, ApiToken) or action in UNAUDITED:
            return
        params: dict[str, Any] = scope.get("path_params") or {}
        target = ",".join(f"{k}:{v}" for k, v in params.items()) or scope["path"]
        entry = AuditEntry(
            id=new_id(),
            at=utc_now(),
            token_id=token.id,
            token_name=token.name,
            source="api",
            action=action,
            target=target,
            detail={"method": scope["method"], "path": scope["path"]},
        )
        try:
            await self.store.record_audit([entry])
        except Exception as exc:  # the write happened; losing its audit line must not 500
            log.warning("audit entry not written (%s %s): %r", action, target, exc)
