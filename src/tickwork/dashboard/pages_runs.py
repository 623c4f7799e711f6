"""Runs (search), one run (DAG, Gantt, attempts, live log), its live feed, dead letters."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.responses import Response, StreamingResponse

from tickwork.app.job_changes import PARAMS_ENV
from tickwork.app.run_cases import RUN_STATE_FILTERS
from tickwork.app.services import utc_now
from tickwork.core.errors import ValidationError
from tickwork.core.model import (
    LogChunk,
    RunDetail,
    RunTrigger,
    TaskKind,
    TaskRun,
    TaskRunState,
)
from tickwork.dashboard.context import Ctx
from tickwork.dashboard.events import PING_EVERY, RETRY_MS, Event, sse
from tickwork.dashboard.pages_ops import SSE_HEADERS
from tickwork.dashboard.svg import dag, gantt
from tickwork.ports import RunFilter, TimeWindow
from tickwork.security.masking import mask_json, mask_text

RUNS_PER_PAGE = 50
LOG_CHUNKS = 2000  # the log opens at its tail: the last chunks; the download has everything
LOG_PAGE = 1000
_WINDOW = ("logical_from", "logical_to", "started_from", "started_to")


def _instant(raw: str | None, name: str) -> datetime | None:
    """An ISO 8601 instant; without an offset (a browser's datetime-local), UTC."""
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(name, "must be a date and time like 2026-12-01T09:00") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


async def runs(ctx: Ctx) -> Response:
    """The same filters as ``GET /api/v1/runs``, as a shareable URL."""
    window = TimeWindow(*(_instant(ctx.query(n), n) for n in _WINDOW))
    page = await ctx.services.list_runs(
        job=ctx.query("job"),
        state=ctx.query("state"),
        limit=RUNS_PER_PAGE,
        cursor=ctx.query("cursor"),
        window=window,
        also=RunFilter(trigger=ctx.query("trigger"), tag=ctx.query("tag")),
    )
    filters = {n: ctx.query(n) or "" for n in ("job", "state", "trigger", "tag", *_WINDOW)}
    kept = {k: v for k, v in filters.items() if v}
    next_url = (
        f"/runs?{urlencode({**kept, 'cursor': page.next_cursor})}" if page.next_cursor else None
    )
    return await ctx.page(
        "runs.html", title="Runs", nav="runs", runs=page.runs, filters=filters,
        states=RUN_STATE_FILTERS, triggers=[t.value for t in RunTrigger], next_url=next_url,
        first_url="/runs?" + urlencode(kept), cursor=ctx.query("cursor"), kept=kept,
    )  # fmt: skip


def _chosen_task(detail: RunDetail, asked: str | None) -> TaskRun | None:
    by_name = {tr.task_name: tr for tr in detail.task_runs}
    if asked in by_name:
        return by_name[asked]
    for wanted in (TaskRunState.RUNNING, TaskRunState.FAILED, TaskRunState.UP_FOR_RETRY):
        for tr in detail.task_runs:
            if tr.state is wanted:
                return tr
    return detail.task_runs[0] if detail.task_runs else None


async def run(ctx: Ctx) -> Response:
    run_id = ctx.request.path_params["run_id"]
    detail = await ctx.services.get_run(run_id)
    chosen = _chosen_task(detail, ctx.query("task"))
    chunks = await ctx.store.read_logs(chosen.id, after_seq=-1, limit=LOG_CHUNKS) if chosen else []
    search = ctx.query("q")
    lines = _lines(chunks, search)
    run_ = detail.run
    job = await ctx.store.get_job(run_.job_name)
    return await ctx.page(
        "run.html",
        title=f"Run {run_id}",
        nav="runs",
        detail=detail,
        run=run_,
        job=job,
        params=_params(detail),
        graph=dag(detail.task_runs, run_id),
        gantt=gantt(detail.task_runs, detail.attempts, ctx.now),
        attempts={
            tr.id: [a for a in detail.attempts if a.task_run_id == tr.id] for tr in detail.task_runs
        },
        chosen=chosen,
        lines=lines,
        last_seq=chunks[-1].seq if chunks else -1,
        truncated=bool(chunks) and chunks[0].seq > 0,
        search=search or "",
        dead={tr.id for tr in detail.task_runs if tr.state is TaskRunState.FAILED},
    )


def _params(detail: RunDetail) -> str:
    """The params a manual run was given, as its first task received them: shell tasks in
    ``TICKWORK_PARAMS``, python tasks as keyword arguments."""
    for tr in detail.task_runs:
        env = tr.config.get("env") or {}
        if tr.kind is TaskKind.SHELL and PARAMS_ENV in env:
            return str(env[PARAMS_ENV])
        if tr.kind is TaskKind.PYTHON and tr.config.get("kwargs"):
            return json.dumps(mask_json(tr.config["kwargs"]), sort_keys=True)
    return ""


def _lines(chunks: list[LogChunk], search: str | None) -> list[tuple[int, str, str]]:
    found = []
    for chunk in chunks:
        for line in mask_text(chunk.data).splitlines():  # as the API shows it
            if search is None or search.lower() in line.lower():
                found.append((chunk.seq, chunk.stream, line))
    return found


async def log_download(ctx: Ctx) -> Response:
    """The whole captured log of one task, streamed a page of chunks at a time."""
    run_id = ctx.request.path_params["run_id"]
    detail = await ctx.services.get_run(run_id)
    chosen = _chosen_task(detail, ctx.query("task"))
    if chosen is None:
        raise ValidationError("task", "this run has no tasks")
    store, task_run_id = ctx.store, chosen.id

    async def body() -> AsyncIterator[bytes]:
        after = -1
        while True:
            chunks = await store.read_logs(task_run_id, after_seq=after, limit=LOG_PAGE)
            for chunk in chunks:
                yield mask_text(chunk.data).encode()
            if len(chunks) < LOG_PAGE:
                return
            after = chunks[-1].seq

    name = f"{run_id}-{chosen.task_name}.log".replace('"', "")
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return StreamingResponse(body(), media_type="text/plain; charset=utf-8", headers=headers)


async def run_events(ctx: Ctx) -> Response:
    """The run page's one live feed: ``state`` events (task states, for recolouring) and
    ``log`` events (new lines of the chosen task; the chunk's seq is the event id, so a
    reconnect resumes where it stopped)."""
    run_id = ctx.request.path_params["run_id"]
    # The digest first, then the state sent at once: a change after the digest is seen by
    # the feed's next probe, so nothing falls between the two.
    seen = await ctx.store.run_digest(run_id)
    detail = await ctx.services.get_run(run_id)
    chosen = _chosen_task(detail, ctx.query("task"))
    resume = ctx.request.headers.get("last-event-id") or ctx.query("after") or "-1"
    after = int(resume) if resume.lstrip("-").isdigit() else -1
    store, hub = ctx.store, ctx.site.hub

    async def states(last: Any) -> tuple[Any, Any]:
        digest = await store.run_digest(run_id)
        if digest == last:
            return last, None
        fresh = await store.get_run(run_id)
        return digest, None if fresh is None else _state_event(fresh)

    async def logs(last: Any) -> tuple[Any, Any]:
        assert chosen is not None
        chunks = await store.read_logs(chosen.id, after_seq=last, limit=LOG_PAGE)
        return (chunks[-1].seq, chunks) if chunks else (last, None)

    async def stream() -> AsyncIterator[str]:
        yield f"retry: {RETRY_MS}\n\n"
        yield sse("state", json.dumps(_state_event(detail)))
        async with hub.subscribe(("run", run_id), "state", states, seen) as queue:
            if chosen is None:
                async for text in _relay(ctx, [queue], after):
                    yield text
                return
            async with hub.subscribe(("log", chosen.id), "log", logs, after) as log_queue:
                sent = after
                backlog = await store.read_logs(chosen.id, after_seq=after, limit=LOG_PAGE)
                if backlog:
                    sent = backlog[-1].seq
                    yield _log_event(backlog)
                async for text in _relay(ctx, [queue, log_queue], sent):
                    yield text

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


async def _relay(ctx: Ctx, queues: list[asyncio.Queue[Event]], sent: int) -> AsyncIterator[str]:
    """Forward events of the run's queues (states, log lines) until the sign-in expires."""
    while True:
        events = await _next_of(queues)
        if not events:
            if utc_now() > ctx.visitor.session.expires_at:
                return
            yield ": ping\n\n"
            continue
        for event in events:
            if event.kind == "close":
                return
            if event.kind == "log":
                fresh = [c for c in event.data if c.seq > sent]
                if fresh:
                    sent = fresh[-1].seq
                    yield _log_event(fresh)
            elif event.kind == "reset":
                yield sse("reset", "")
            else:
                yield sse(event.kind, json.dumps(event.data))


async def _next_of(queues: list[asyncio.Queue[Event]]) -> list[Event]:
    """What the first of ``queues`` to speak says (every one that spoke at once); [] after
    PING_EVERY seconds of quiet. Cancelling a ``get`` loses no item."""
    getters = [asyncio.ensure_future(q.get()) for q in queues]
    done, pending = await asyncio.wait(
        getters, timeout=PING_EVERY, return_when=asyncio.FIRST_COMPLETED
    )
    for waiting in pending:
        waiting.cancel()
    return [g.result() for g in getters if g in done]


def _state_event(detail: RunDetail) -> dict[str, Any]:
    return {
        "run": str(detail.run.state),
        "tasks": {tr.task_name: [str(tr.state), tr.attempt] for tr in detail.task_runs},
    }


def _log_event(chunks: list[LogChunk]) -> str:
    lines = [[c.seq, c.stream, line] for c in chunks for line in mask_text(c.data).splitlines()]
    return sse("log", json.dumps(lines), event_id=str(chunks[-1].seq))


async def dead_letters(ctx: Ctx) -> Response:
    page = await ctx.services.dead_letters(
        job=ctx.query("job"), limit=RUNS_PER_PAGE, cursor=ctx.query("cursor")
    )
    job = ctx.query("job")
    kept = {"job": job} if job else {}
    next_url = (
        f"/dead-letters?{urlencode({**kept, 'cursor': page.next_cursor})}"
        if page.next_cursor
        else None
    )
    return await ctx.page(
        "dead_letters.html", title="Dead letters", nav="dead", task_runs=page.task_runs,
        job=job or "", next_url=next_url,
    )  # fmt: skip
