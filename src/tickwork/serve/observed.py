"""The observability parts every process kind wires the same way: its registration in the
process registry, the probe server of ``--metrics-port``, and the warning about queues no
worker takes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import uvicorn

from tickwork.core.errors import StoreUnavailable
from tickwork.observe import metrics
from tickwork.observe.facts import FactsSource
from tickwork.observe.health import Health
from tickwork.observe.http import MetricsEndpoint, probe_app
from tickwork.ports import Broker, Store, WorkerInfo
from tickwork.worker.pool import WorkerPool

log = logging.getLogger("tickwork")

REGISTRY_EVERY = 2.0  # seconds between a process's registry heartbeats
UNSERVED_EVERY = 30.0  # seconds between looks for queues with work and no worker
UNSERVED_FIRST = 5.0  # seconds after start of the first look (workers register meanwhile)
FORGET_AFTER = timedelta(days=1)  # a registration silent this long is deleted
FORGET_EVERY = 300  # registry beats between two such clean-ups


def utcnow() -> datetime:
    return datetime.now(UTC)


def job_label() -> bool:
    """Whether metrics carry job names (``TICKWORK_METRICS_JOB_LABEL=all``; default none)."""
    return os.environ.get("TICKWORK_METRICS_JOB_LABEL", "none").strip().lower() == "all"


def broker_check(broker: Broker) -> Callable[[], Awaitable[object]]:
    """The broker's readiness check: ``ping`` where it has one (Redis), else ``depths``."""
    ping: Callable[[], Awaitable[object]] | None = getattr(broker, "ping", None)
    return ping if ping is not None else broker.depths


def process_info(
    pid_id: str, kind: str, queues: tuple[str, ...] = (), concurrency: int = 0
) -> WorkerInfo:
    now = utcnow()
    return WorkerInfo(
        id=pid_id,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        queues=queues,
        concurrency=concurrency,
        started_at=now,
        heartbeat_at=now,
        kind=kind,
    )


async def registry_beats(store: Store, wid: str, running: Callable[[], int]) -> None:
    """Tell the registry every ``REGISTRY_EVERY`` s that this process lives (for ``status``),
    and now and then forget processes silent for a day (they were killed, not stopped)."""
    beats = 0
    while True:
        await asyncio.sleep(REGISTRY_EVERY)
        with contextlib.suppress(StoreUnavailable):
            await store.worker_heartbeat(wid, utcnow(), running())
            beats += 1
            if beats % FORGET_EVERY == 1:
                await store.forget_workers(utcnow() - FORGET_AFTER)


async def stop_registration(store: Store, wid: str) -> None:
    with contextlib.suppress(StoreUnavailable):
        await store.worker_heartbeat(wid, utcnow(), 0, stopped=True)


def probe_server(host: str, port: int, health: Health, metrics: MetricsEndpoint) -> uvicorn.Server:
    """The server of ``--metrics-port``: ``/metrics``, ``/livez``, ``/readyz``."""
    config = uvicorn.Config(
        probe_app(health, metrics),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    return uvicorn.Server(config)


async def warn_unserved(facts: FactsSource, active: Callable[[], bool]) -> None:
    """Log a warning when a queue has work and no live worker takes it (once, until it is
    served again). Runs where the facts are exported: the leader, or ``tickwork up``."""
    warned: set[str] = set()
    await asyncio.sleep(UNSERVED_FIRST)
    while True:
        if active():
            with contextlib.suppress(StoreUnavailable):
                warned = await _warn_new(facts, warned)
        await asyncio.sleep(UNSERVED_EVERY)


async def _warn_new(facts: FactsSource, warned: set[str]) -> set[str]:
    snap = await facts.snapshot()
    waiting = snap.waiting()
    unserved = {q for q, n in waiting.items() if n and not snap.serves(q)}
    for queue in sorted(unserved - warned):
        log.warning(
            "queue %r has %d task run(s) waiting and no live worker takes it; "
            "start a worker with --queues %s",
            queue,
            waiting[queue],
            queue,
        )
    return unserved


def track_slots(pool: WorkerPool) -> None:
    """This process's concurrency (it moves with ``--autoscale``) and its busy and free
    worker slots, read at scrape time."""
    metrics.WORKER_CONCURRENCY.set_function(lambda: float(pool.concurrency))
    metrics.WORKER_SLOTS.labels("busy").set_function(lambda: float(pool.busy))
    metrics.WORKER_SLOTS.labels("free").set_function(
        lambda: float(max(pool.concurrency - pool.busy, 0))
    )
