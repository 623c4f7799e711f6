"""Overview, workers and queues, pools, the audit log, and the site-wide live feed."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from starlette.responses import Response, StreamingResponse

from tickwork.app.services import utc_now
from tickwork.core.errors import ValidationError
from tickwork.dashboard.context import Ctx
from tickwork.dashboard.events import RETRY_MS, next_event, sse
from tickwork.dashboard.svg import state_bars
from tickwork.ports import WorkerInfo
from tickwork.ports.web import QueueDepth

LEASE = "scheduler"
DEAD_LETTER_CAP = 10_000
FAILING_ROWS = 10
ALERT_ROWS = 10
LATENESS_SAMPLE = 2000
A = TypeVar("A")
B = TypeVar("B")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def overview(ctx: Ctx) -> Response:
    store, now = ctx.store, ctx.now
    hour_ago = now - timedelta(hours=1)
    # The reads are independent: at once, the page waits for the slowest, not for the sum
    # of nine round trips (PostgreSQL) or thread hops (SQLite).
    (
        (hour, day),
        lateness,
        depths,
        (processes, lease),
        (dead, failing),
        alerts,
    ) = await asyncio.gather(
        _both(store.run_state_counts(hour_ago), store.run_state_counts(now - timedelta(days=1))),
        store.start_lateness(hour_ago, LATENESS_SAMPLE),
        store.queue_depths(),
        _both(ctx.site.processes(now), store.get_lease(LEASE)),
        _both(store.dead_letter_count(DEAD_LETTER_CAP), store.failing_now(hour_ago, FAILING_ROWS)),
        store.recent_alerts(hour_ago, limit=ALERT_ROWS),
    )
    workers = await ctx.site.workers(now, processes)
    ctx.site.note_orphans(depths, workers)  # the page's red banner needs no second look
    lateness = sorted(lateness)
    return await ctx.page(
        "overview.html",
        title="Overview",
        nav="overview",
        hour_bars=state_bars({c.state: c.count for c in hour}, "Runs by state, last hour"),
        day_bars=state_bars({c.state: c.count for c in day}, "Runs by state, last 24 hours"),
        p50=_quantile(lateness, 0.5),
        p99=_quantile(lateness, 0.99),
        samples=len(lateness),
        queues=_by_queue(depths),
        workers=workers,
        lease=lease,
        standbys=standbys(processes, lease.holder if lease else None),
        embedded=ctx.site.local_worker is not None,
        dead=dead,
        dead_cap=DEAD_LETTER_CAP,
        failing=failing,
        alerts=alerts,
    )


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    return await asyncio.gather(first, second)


def _by_queue(depths: list[QueueDepth]) -> list[tuple[str, dict[str, Any]]]:
    """Depth and oldest waiting item per queue, over its priority lanes."""
    queues: dict[str, dict[str, Any]] = defaultdict(lambda: {"depth": 0, "oldest": None})
    for d in depths:
        q = queues[d.queue]
        q["depth"] += d.depth
        if d.oldest_queued_at and (q["oldest"] is None or d.oldest_queued_at < q["oldest"]):
            q["oldest"] = d.oldest_queued_at
    return sorted(queues.items())


def standbys(processes: list[WorkerInfo], leader: str | None) -> list[WorkerInfo]:
    """Live scheduler replicas (and ``tickwork up`` processes) that do not hold the lease:
    they campaign for it and take over if the leader stops, as ``GET /status`` lists them."""
    return [w for w in processes if w.kind != "worker" and w.id != leader]


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]


async def workers(ctx: Ctx) -> Response:
    found = await ctx.site.workers(ctx.now)
    running = await ctx.store.running_task_runs(500)
    by_worker: dict[str, list[Any]] = defaultdict(list)
    for tr in running:
        by_worker[tr.worker_id or ""].append(tr)
    return await ctx.page(
        "workers.html",
        title="Workers and queues",
        nav="workers",
        workers=found,
        by_worker=by_worker,
        running=running,
        depths=await ctx.store.queue_depths(),
    )


async def pools(ctx: Ctx) -> Response:
    return await ctx.page(
        "pools.html",
        title="Pools",
        nav="pools",
        pools=await ctx.store.list_pools(),
        waiting=await ctx.store.pool_waiting(),
    )


async def audit(ctx: Ctx) -> Response:
    cursor = ctx.query("cursor")
    token_name = ctx.query("token")
    if cursor is not None and not cursor.isalnum():
        raise ValidationError("cursor", "is not a cursor returned by a previous page")
    page = await ctx.store.list_audit(limit=50, cursor=cursor, token_name=token_name)
    return await ctx.page(
        "audit.html", title="Audit log", nav="audit", page=page, token_name=token_name or ""
    )


async def site_events(ctx: Ctx) -> Response:
    """The live feed of list pages: one ``changed`` event whenever runs start, end or fail."""
    store, hub = ctx.store, ctx.site.hub

    async def probe(last: Any) -> tuple[Any, Any]:
        digest = json.dumps(await store.change_digest(), default=str)
        return digest, (None if digest == last else digest)

    # Seeds a new feed (an existing one knows the state already): one query per connection.
    seen = json.dumps(await store.change_digest(), default=str)

    async def stream() -> AsyncIterator[str]:
        yield f"retry: {RETRY_MS}\n\n"
        async with hub.subscribe("site", "changed", probe, seen) as queue:
            while True:
                event = await next_event(queue)
                if event is None:
                    if utc_now() > ctx.visitor.session.expires_at:
                        return  # the sign-in expired: the browser reconnects to a 401
                    yield ": ping\n\n"
                    continue
                if event.kind == "close":
                    return
                yield sse(event.kind, "" if event.data is None else str(event.data))

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)
