"""Mounting the dashboard on the API app: routes, the sign-in gate, CSRF and audit of actions.

Every page needs a signed-in visitor (a session cookie; see ``session.py``); without one, a
page redirects to the sign-in form. Every action is a POST carrying the session's CSRF token,
is checked against the visitor's token scope on the server (the page only hides buttons), and
is written to the audit log, refused or not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from importlib.resources import files
from urllib.parse import quote

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from tickwork.api.auth import Security
from tickwork.app.services import Services, utc_now
from tickwork.core.errors import Conflict, NotFound, TickworkError, ValidationError
from tickwork.dashboard import actions, pages_jobs, pages_ops, pages_runs
from tickwork.dashboard.audit import record
from tickwork.dashboard.context import PAGE_HEADERS, Ctx, Site, back, form_of, safe_path
from tickwork.dashboard.events import Hub
from tickwork.dashboard.render import render
from tickwork.dashboard.session import csrf_ok, visitor
from tickwork.ports import Scope, WorkerInfo

log = logging.getLogger("tickwork.dashboard")

View = Callable[[Ctx], Awaitable[Response]]
STATIC = "/static"


def with_dashboard(
    app: FastAPI,
    services: Services,
    *,
    writable: bool = True,
    local_worker: WorkerInfo | None = None,
) -> FastAPI:
    """Serve the dashboard at ``/`` of ``app`` (whose API stays under ``/api/v1``).

    ``writable``: False where the API is read-only (its store may be a replica): pages only.
    ``local_worker``: the in-process worker pool of ``tickwork up``, shown as a worker.
    """
    security: Security = app.state.security
    site = Site(services, security, Hub(), writable, local_worker)
    app.state.dashboard = site
    app.router.routes.extend(routes(site))
    return app


async def end_streams_on_exit(app: FastAPI, exiting: Callable[[], bool]) -> None:
    """Once ``exiting()`` (the server was told to stop), end the dashboard's live streams:
    the server waits for open responses before it stops, and these would never end."""
    site: Site | None = getattr(app.state, "dashboard", None)
    while not exiting():  # noqa: ASYNC110 - uvicorn's should_exit is a plain flag, no event
        await asyncio.sleep(0.1)
    if site is not None:
        await site.hub.close()


def routes(site: Site) -> list[BaseRoute]:
    static = StaticFiles(directory=str(files("tickwork.dashboard") / "static"))
    table: list[BaseRoute] = [
        Route("/", _page(site, pages_ops.overview)),
        Route("/signin", _signin_page(site), methods=["GET"]),
        Route("/signin", _signin_post(site), methods=["POST"]),
        Route("/signout", _action(site, actions.sign_out, Scope.READ), methods=["POST"]),
        Route("/events", _page(site, pages_ops.site_events)),
        Route("/jobs", _page(site, pages_jobs.jobs)),
        Route("/jobs/{name}", _page(site, pages_jobs.job)),
        Route("/jobs/{name}/grid", _page(site, pages_jobs.grid)),
        Route("/runs", _page(site, pages_runs.runs)),
        Route("/runs/{run_id}", _page(site, pages_runs.run)),
        Route("/runs/{run_id}/events", _page(site, pages_runs.run_events)),
        Route("/runs/{run_id}/log.txt", _page(site, pages_runs.log_download)),
        Route("/calendar", _page(site, pages_jobs.calendar)),
        Route("/dead-letters", _page(site, pages_runs.dead_letters)),
        Route("/workers", _page(site, pages_ops.workers)),
        Route("/pools", _page(site, pages_ops.pools)),
        Route("/audit", _page(site, pages_ops.audit)),
        Mount(STATIC, static, name="static"),
    ]
    for path, view in actions.ROUTES:
        table.append(Route(path, _action(site, view, Scope.WRITE), methods=["POST"]))
    return table


def _page(site: Site, view: View) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        now = utc_now()
        who = await visitor(request, site.store, now)
        if who is None:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/signin?next={quote(target, safe='')}", status_code=303)
        try:
            return await view(Ctx(request, site, who, now))
        except TickworkError as exc:
            return await _error_page(Ctx(request, site, who, now), exc)

    return endpoint


def _action(site: Site, view: View, scope: Scope) -> Callable[[Request], Awaitable[Response]]:
    """A state-changing POST: session, CSRF, scope, then the view; audited either way."""

    async def endpoint(request: Request) -> Response:
        now = utc_now()
        who = await visitor(request, site.store, now)
        if who is None:
            return _refused(401, "Sign in first: this action needs a session.")
        form = await form_of(request)
        if not csrf_ok(who.session.csrf, form.get("csrf")):
            return _refused(403, "The form's CSRF token is missing or wrong; reload the page.")
        ctx = Ctx(request, site, who, now)
        if not ctx.may(scope) and view is not actions.sign_out:
            await record(ctx, view.__name__, request.url.path, outcome="forbidden")
            return _refused(403, f"Your token ({who.token.scope}) may not do this.")
        try:
            return await view(ctx)
        except TickworkError as exc:
            await record(ctx, view.__name__, request.url.path, outcome="refused")
            return back(request, _referer(request), f"Refused: {_say(exc)}")

    return endpoint


def _referer(request: Request) -> str:
    referer = request.headers.get("referer", "")
    origin = f"{request.url.scheme}://{request.url.netloc}"
    return safe_path(referer.removeprefix(origin)) if referer.startswith(origin) else "/"


def _refused(status: int, message: str) -> Response:
    html = render("refused.html", status=status, message=message)
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


def _say(exc: TickworkError) -> str:
    if isinstance(exc, ValidationError):
        return f"{exc.field}: {exc.reason}"
    return str(exc)


async def _error_page(ctx: Ctx, exc: TickworkError) -> Response:
    status = 404 if isinstance(exc, NotFound) else 409 if isinstance(exc, Conflict) else 400
    return await ctx.page("error.html", status=status, message=_say(exc))


def _signin_page(site: Site) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await actions.signin_form(request, site)

    return endpoint


def _signin_post(site: Site) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await actions.sign_in(request, site, utc_now())

    return endpoint
