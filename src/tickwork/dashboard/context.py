"""What every dashboard view gets (``Ctx``) and how views answer: a page, a redirect."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.dashboard.events import Hub
from tickwork.dashboard.render import render
from tickwork.dashboard.session import Visitor, set_cookie
from tickwork.ports import Scope, Store, WorkerInfo
from tickwork.ports.web import QueueDepth

FLASH_COOKIE = "tw_flash"
THEME_COOKIE = "tw_theme"
#: A worker whose last heartbeat is older than this is not counted as alive.
WORKER_ALIVE = timedelta(seconds=30)
#: The "work but no live worker" check is shared by every page for this long.
ALARM_TTL = 1.0


@dataclass
class Site:
    """The dashboard's wiring: services, auth, the live-update hub and what this process is."""

    services: Services
    security: Security
    hub: Hub
    writable: bool  # False for a read-only API (`tickwork api --role read`): no actions
    local_worker: WorkerInfo | None = None  # `tickwork up`'s in-process worker pool
    _alarm: tuple[float, list[str]] = field(default=(0.0, []))

    @property
    def store(self) -> Store:
        return self.services.store

    async def processes(self, now: datetime) -> list[WorkerInfo]:
        """Registered processes (workers, scheduler replicas, ``tickwork up``) alive lately."""
        found = await self.store.list_workers(seen_since=now - WORKER_ALIVE)
        return [w for w in found if w.stopped_at is None]

    async def workers(
        self, now: datetime, processes: list[WorkerInfo] | None = None
    ) -> list[WorkerInfo]:
        """Live workers: registered ones that heart-beat lately, plus the in-process pool."""
        local = None if self.local_worker is None else self.local_worker.id
        alive = await self.processes(now) if processes is None else processes
        # The registry holds scheduler replicas too, and `tickwork up` itself.
        found = [w for w in alive if w.kind != "scheduler" and w.id != local]
        if self.local_worker is not None:
            found.insert(0, _with_heartbeat(self.local_worker, now))
        return found

    async def orphan_queues(self, now: datetime) -> list[str]:
        """Queues holding queued work that no live worker takes (shown in red on every page)."""
        at, cached = self._alarm
        if time.monotonic() - at < ALARM_TTL:
            return cached
        return self.note_orphans(await self.store.queue_depths(), await self.workers(now))

    def note_orphans(self, depths: list[QueueDepth], workers: list[WorkerInfo]) -> list[str]:
        """The orphan queues given the depths and live workers a page has read anyway; kept
        for ``ALARM_TTL`` like a fresh look."""
        taken = {q for w in workers for q in w.queues}
        orphans = sorted({d.queue for d in depths if d.depth} - taken) if "*" not in taken else []
        self._alarm = (time.monotonic(), orphans)
        return orphans


def _with_heartbeat(worker: WorkerInfo, now: datetime) -> WorkerInfo:
    return WorkerInfo(
        id=worker.id,
        hostname=worker.hostname,
        pid=worker.pid,
        queues=worker.queues,
        concurrency=worker.concurrency,
        started_at=worker.started_at,
        heartbeat_at=now,
        running=worker.running,
    )


@dataclass
class Ctx:
    """One request to the dashboard by a signed-in visitor."""

    request: Request
    site: Site
    visitor: Visitor
    now: datetime

    @property
    def services(self) -> Services:
        return self.site.services

    @property
    def store(self) -> Store:
        return self.site.store

    def may(self, scope: Scope) -> bool:
        return self.site.writable and self.visitor.token.scope.allows(scope)

    def query(self, name: str) -> str | None:
        value = self.request.query_params.get(name)
        return value.strip() if value and value.strip() else None

    async def page(self, template: str, status: int = 200, **context: Any) -> Response:
        raw_flash = self.request.cookies.get(FLASH_COOKIE)
        flash = unquote(raw_flash) if raw_flash else None
        html = render(
            template,
            ctx=self,
            token=self.visitor.token,
            csrf=self.visitor.session.csrf,
            may_write=self.may(Scope.WRITE),
            may_admin=self.may(Scope.ADMIN),
            orphans=await self.site.orphan_queues(self.now),
            flash=flash,
            theme=self.request.cookies.get(THEME_COOKIE, ""),
            path=self.request.url.path,
            **context,
        )
        response = HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)
        if raw_flash is not None:
            response.delete_cookie(FLASH_COOKIE, path="/")
        return response


#: No inline script or style anywhere, so the policy can be strict; frames refused.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def back(request: Request, to: str, message: str) -> Response:
    """303 to ``to`` (a path of ours) with a one-time message shown there."""
    response = RedirectResponse(safe_path(to), status_code=303)
    set_cookie(request, response, FLASH_COOKIE, quote(message[:300]), 30)
    return response


def safe_path(to: str | None, default: str = "/") -> str:
    """Only paths on this site: never another host (``//evil``) or a scheme."""
    if not to or not to.startswith("/") or to.startswith("//") or "\\" in to:
        return default
    return to


async def form_of(request: Request) -> FormData:
    """The posted form. Every form of the dashboard is URL-encoded (no uploads), so it is read
    here instead of through ``python-multipart``; the API's body limit bounds its size."""
    cached: FormData | None = request.scope.get("tw_form")
    if cached is None:
        text = (await request.body()).decode("utf-8", errors="replace")
        pairs: list[tuple[str, str | UploadFile]] = list(
            parse_qsl(text, keep_blank_values=True, max_num_fields=1000)
        )
        cached = FormData(pairs)
        request.scope["tw_form"] = cached
    return cached
