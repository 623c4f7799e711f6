"""``tickwork worker --autoscale MIN:MAX``: every ``AUTOSCALE_EVERY`` seconds, measure the
worker's queues' backlog, its busy slots and its tasks' durations, let
``core.autoscale.decide`` pick the concurrency, and resize the pool to it. The new
concurrency is in ``tickwork_worker_concurrency`` and, through the registry, in ``status``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime

from tickwork.core.autoscale import Bounds, decide
from tickwork.core.errors import StoreUnavailable
from tickwork.core.why import EVERY_QUEUE
from tickwork.ports import Broker, Store, WorkerInfo
from tickwork.ports.broker import BrokerUnavailable
from tickwork.worker.pool import WorkerPool

log = logging.getLogger("tickwork.worker")

AUTOSCALE_EVERY = 1.0  # seconds between two decisions


async def backlog_of(broker: Broker, queues: tuple[str, ...]) -> int:
    """Messages ready on ``queues`` (all of them with ``*``), not yet taken by a worker."""
    depths = await broker.depths()
    if EVERY_QUEUE in queues:
        return sum(depths.values())
    return sum(n for queue, n in depths.items() if queue in queues)


async def autoscale(
    pool: WorkerPool,
    broker: Broker,
    queues: tuple[str, ...],
    bounds: Bounds,
    *,
    every: float = AUTOSCALE_EVERY,
    on_change: Callable[[int], Awaitable[None]] | None = None,
) -> None:
    """Resize ``pool`` within ``bounds`` until cancelled."""
    while True:
        await asyncio.sleep(every)
        try:
            backlog = await backlog_of(broker, queues)
        except BrokerUnavailable:
            continue  # the broker is down: keep the concurrency; decide again next time
        ahead = pool.active_count - pool.busy  # claimed ahead of a slot: waiting here
        new = decide(
            pool.concurrency,
            bounds,
            busy=pool.busy,
            backlog=backlog + ahead,
            avg_duration=pool.avg_duration,
        )
        if new == pool.concurrency:
            continue
        log.info(
            "autoscale: %d -> %d tasks at once (%d running, %d waiting, %.2f s each)",
            pool.concurrency,
            new,
            pool.busy,
            backlog + ahead,
            pool.avg_duration,
        )
        pool.resize(new)
        if on_change is not None:
            await on_change(new)


def reregister(store: Store, info: WorkerInfo) -> Callable[[int], Awaitable[None]]:
    """What to do on a change: register the worker again with its new concurrency, so that
    ``tickwork status`` shows it (a failed write is retried at the next change)."""

    async def changed(concurrency: int) -> None:
        now = datetime.now(UTC)
        with contextlib.suppress(StoreUnavailable):
            await store.register_worker(replace(info, concurrency=concurrency, heartbeat_at=now))

    return changed
