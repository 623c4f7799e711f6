"""The dashboard's actions: each a POST that calls one service, audits it, and redirects back
to a page that shows the result (so it works without JavaScript)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from tickwork.api.auth import AuthError, require_job_scope
from tickwork.app.services import Services
from tickwork.core.errors import ValidationError
from tickwork.core.model import RunDetail
from tickwork.dashboard.audit import record
from tickwork.dashboard.context import PAGE_HEADERS, Ctx, Site, back, form_of, safe_path
from tickwork.dashboard.render import render
from tickwork.dashboard.session import (
    COOKIE,
    SESSION_TTL,
    SIGNIN_COOKIE,
    csrf_ok,
    new_signin_nonce,
    set_cookie,
)
from tickwork.dashboard.session import sign_in as start_session
from tickwork.dashboard.session import (
    sign_out as end_session,
)
from tickwork.ids import new_id
from tickwork.ports.web import AuditEntry

#: A dashboard action: the request's context in, a redirect (or page) out.
View = Callable[[Ctx], Awaitable[Response]]
#: A service method taking one name or id (``Services.pause``, ``Services.cancel_run``, ...).
ServiceCall = Callable[[Services, str], Awaitable[object]]
#: A service method acting on one task run, answering its run.
TaskRunCall = Callable[[Services, str], Awaitable[RunDetail]]

#: At most this many dead letters are retried by one bulk action (the page's selection).
BULK_LIMIT = 500

# -- sign-in -------------------------------------------------------------------------------


async def signin_form(
    request: Request, site: Site, error: str = "", status: int = 200, next_path: str = ""
) -> Response:
    nonce = new_signin_nonce()
    html = render(
        "signin.html",
        nonce=nonce,
        next=safe_path(next_path or request.query_params.get("next")),
        error=error,
        theme=request.cookies.get("tw_theme", ""),
    )
    response = HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)
    set_cookie(request, response, SIGNIN_COOKIE, nonce, 600)
    return response


async def sign_in(request: Request, site: Site, now: datetime) -> Response:
    form = await form_of(request)
    target = form.get("next")
    next_path = target if isinstance(target, str) else ""
    if not csrf_ok(request.cookies.get(SIGNIN_COOKIE, ""), form.get("csrf")):
        message = "The form expired; paste the token again."
        return await signin_form(request, site, message, 403, next_path)
    presented = form.get("token")
    started = (
        await start_session(site.security, site.store, presented, now)
        if isinstance(presented, str) and presented.strip()
        else None
    )
    if started is None:
        message = "That token is unknown or revoked."
        return await signin_form(request, site, message, 401, next_path)
    secret, token = started
    await site.store.record_audit(
        [AuditEntry(new_id(), now, token.id, token.name, "dashboard", "sign_in", "dashboard")]
    )
    response = RedirectResponse(safe_path(next_path), 303)
    set_cookie(request, response, COOKIE, secret, int(SESSION_TTL.total_seconds()))
    response.delete_cookie(SIGNIN_COOKIE, path="/")
    return response


async def sign_out(ctx: Ctx) -> Response:
    await end_session(ctx.request, ctx.store, ctx.now)
    await record(ctx, "sign_out", "dashboard")
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


# -- jobs ----------------------------------------------------------------------------------


async def _job_allowed(ctx: Ctx, name: str) -> None:
    """The API's rule for changing a job, checked again here: a job that runs code on
    workers (shell or python tasks or callbacks) needs an ``admin`` token."""
    job = await ctx.services.get_job(name)
    try:
        require_job_scope(ctx.visitor.token, job.tasks, [job.callbacks])
    except AuthError as exc:
        raise ValidationError("token", exc.message) from None


async def trigger(ctx: Ctx) -> Response:
    name = ctx.request.path_params["name"]
    form = await form_of(ctx.request)
    await _job_allowed(ctx, name)
    params = _params(form.get("params"))
    detail = await ctx.services.trigger(name, params=params)
    await record(ctx, "trigger", f"job:{name}", {"run_id": detail.run.id, "params": params or {}})
    return back(ctx.request, f"/runs/{detail.run.id}", f"Triggered {name}: run {detail.run.id}")


def _params(raw: object) -> dict[str, Any] | None:
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValidationError("params", f"is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ValidationError("params", "must be a JSON object")
    return value


def _on_job(action: str, call: ServiceCall, said: str, *, to_list: bool = False) -> View:
    """A job's action: check the job's scope, call the service, audit, go back with a note
    (``said`` may name ``{name}``), to the job's page or, for ``to_list``, the job list."""

    async def view(ctx: Ctx) -> Response:
        name = ctx.request.path_params["name"]
        await _job_allowed(ctx, name)
        await call(ctx.services, name)
        await record(ctx, action, f"job:{name}")
        where = "/jobs" if to_list else f"/jobs/{quote(name)}"
        return back(ctx.request, where, said.format(name=name))

    return view


pause = _on_job("pause", Services.pause, "Paused {name}")
resume = _on_job("resume", Services.resume, "Resumed {name}")
delete = _on_job("delete", Services.delete_job, "Deleted {name} (its history stays)", to_list=True)


# -- runs ----------------------------------------------------------------------------------


async def _run_allowed(ctx: Ctx, run_id: str) -> None:
    run = (await ctx.services.get_run(run_id)).run
    await _job_allowed_by_id(ctx, run.job_name)


async def _job_allowed_by_id(ctx: Ctx, job_name: str) -> None:
    # A deleted job's runs may still be retried or cancelled: the run's own tasks decide.
    job = await ctx.store.get_job(job_name)
    if job is not None:
        await _job_allowed(ctx, job_name)


def _on_run(action: str, call: ServiceCall, said: str) -> View:
    """A run's action: check its job's scope, call the service, audit, back to the run."""

    async def view(ctx: Ctx) -> Response:
        run_id = ctx.request.path_params["run_id"]
        await _run_allowed(ctx, run_id)
        await call(ctx.services, run_id)
        await record(ctx, action, f"run:{run_id}")
        return back(ctx.request, f"/runs/{run_id}", said)

    return view


cancel_run = _on_run("cancel_run", Services.cancel_run, "Cancel requested")
retry_run = _on_run("retry_run", Services.retry_run, "Failed tasks retried")


async def replay_run(ctx: Ctx) -> Response:
    """Mark a finished run for replay: every task of it runs again, the history kept."""
    run_id = ctx.request.path_params["run_id"]
    await _run_allowed(ctx, run_id)
    detail = await ctx.services.replay_run(run_id)
    tasks = len(detail.task_runs)
    await record(ctx, "replay_run", f"run:{run_id}", {"tasks": tasks})
    return back(ctx.request, f"/runs/{run_id}", f"Marked for replay: {tasks} task(s) run again")


def _on_task_run(
    action: str, call: Callable[[Services, str], Awaitable[RunDetail]], said: str
) -> View:
    """A task run's action: check its job's scope, call the service, audit, back to its run."""

    async def view(ctx: Ctx) -> Response:
        task_run_id = ctx.request.path_params["task_run_id"]
        task_run = await ctx.store.get_task_run(task_run_id)
        if task_run is not None:
            await _job_allowed_by_id(ctx, task_run.job_name)
        detail = await call(ctx.services, task_run_id)
        await record(ctx, action, f"task_run:{task_run_id}")
        return back(ctx.request, f"/runs/{detail.run.id}", said)

    return view


cancel_task = _on_task_run("cancel_task_run", Services.cancel_task_run, "Cancel requested")
retry_task = _on_task_run("retry_task_run", Services.retry_task_run, "Task retried")


async def retry_dead_letters(ctx: Ctx) -> Response:
    """Retry the selected dead letters: each one task run, each checked and audited."""
    form = await form_of(ctx.request)
    ids = [v for v in form.getlist("task_run_id") if isinstance(v, str)][:BULK_LIMIT]
    if not ids:
        raise ValidationError("task_run_id", "select at least one dead letter")
    done, refused = [], []
    for task_run_id in ids:
        try:
            task_run = await ctx.store.get_task_run(task_run_id)
            if task_run is not None:
                await _job_allowed_by_id(ctx, task_run.job_name)
            await ctx.services.retry_task_run(task_run_id)
            done.append(task_run_id)
        except Exception as exc:  # one refusal must not stop the others
            refused.append(f"{task_run_id}: {exc}")
    await record(ctx, "retry_dead_letters", "dead-letters", {"retried": done, "refused": refused})
    message = f"Retried {len(done)} dead letter(s)"
    if refused:
        message += f"; {len(refused)} refused ({refused[0]})"
    return back(ctx.request, "/dead-letters", message)


ROUTES = (
    ("/jobs/{name}/trigger", trigger),
    ("/jobs/{name}/pause", pause),
    ("/jobs/{name}/resume", resume),
    ("/jobs/{name}/delete", delete),
    ("/runs/{run_id}/cancel", cancel_run),
    ("/runs/{run_id}/retry", retry_run),
    ("/runs/{run_id}/replay", replay_run),
    ("/task-runs/{task_run_id}/cancel", cancel_task),
    ("/task-runs/{task_run_id}/retry", retry_task),
    ("/dead-letters/retry", retry_dead_letters),
)
