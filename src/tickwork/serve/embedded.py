"""`tickwork up`: scheduler, worker pool and HTTP API in one process, on SQLite by default."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import random
import signal
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import httpx2
import uvicorn
from fastapi import FastAPI

from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.app.settings import EMBEDDED_GRACE, Settings
from tickwork.app.status import StatusService
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import EVERY_QUEUE, MemoryBroker
from tickwork.broker.signals import MemoryCancelSignals
from tickwork.core.errors import TickworkError
from tickwork.core.model import Outcome, TaskKind, TaskRunState
from tickwork.dashboard import end_streams_on_exit, with_dashboard
from tickwork.hooks import CallbackErrorLog, Hooks
from tickwork.ids import new_id
from tickwork.observe import metrics
from tickwork.observe.facts import FactsSource
from tickwork.observe.health import Health
from tickwork.observe.http import MetricsEndpoint
from tickwork.observe.logs import configure_logging
from tickwork.observe.runner import observed_runners
from tickwork.observe.store import observed_broker, observed_store
from tickwork.ports import Completion, Runner, Store, WorkerInfo
from tickwork.scheduler.history import HistoryConfig, maintain_history
from tickwork.scheduler.loop import Scheduler
from tickwork.security.ssrf import TargetRefused, UrlGuard, parse_allow
from tickwork.serve.observed import (
    job_label,
    process_info,
    registry_beats,
    stop_registration,
    track_slots,
    warn_unserved,
)
from tickwork.serve.signals import DrainingServer
from tickwork.serve.tuning import tune_gc
from tickwork.store import open_store
from tickwork.worker import capture
from tickwork.worker.pool import PoolConfig, WorkerPool
from tickwork.worker.runners import HttpGuard, RequestRefused, build_runners, close_runners

log = logging.getLogger("tickwork")

HOOKS_GRACE = 5.0  # seconds callbacks still running at shutdown get to finish


def utcnow() -> datetime:
    return datetime.now(UTC)


class DataDirLocked(TickworkError):
    """Another `tickwork up` already owns this data directory."""


class BadSetting(TickworkError):
    """A setting (option or environment variable) tickwork cannot use."""


def url_guard(settings: Settings) -> UrlGuard:
    """The SSRF guard of http tasks, opened to the networks in ``http_allow``."""
    try:
        return UrlGuard(parse_allow(settings.http_allow))
    except ValueError as exc:
        raise BadSetting(str(exc)) from None


def runner_guard(guard: UrlGuard) -> HttpGuard:
    """``guard`` as the http runner's send-time check (DNS may have changed since saving)."""

    async def check(url: httpx2.URL) -> None:
        try:
            await guard.check(url)
        except TargetRefused as exc:
            raise RequestRefused(str(exc)) from None

    return check


@contextlib.contextmanager
def lock_data_dir(data_dir: Path) -> Iterator[IO[str]]:
    """Hold an exclusive lock on the data dir, so exactly one embedded process uses it.

    That exclusivity is what lets start-up treat every `running` task run as orphaned.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    handle = (data_dir / "tickwork.lock").open("w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise DataDirLocked(
            f"data dir {data_dir} is in use by another tickwork process; "
            "stop it or pass another --data-dir"
        ) from None
    try:
        handle.write(str(os.getpid()))
        handle.flush()
        yield handle
    finally:
        handle.close()


@dataclass
class Embedded:
    """The parts of a running embedded tickwork, wired together."""

    store: Store
    broker: MemoryBroker
    scheduler: Scheduler
    pool: WorkerPool
    services: Services
    runners: Mapping[TaskKind, Runner]
    hooks: Hooks
    cancels: MemoryCancelSignals
    callback_errors: CallbackErrorLog  # failed callbacks, into their task runs' logs
    facts: FactsSource  # the database's facts, for /metrics and status
    health: Health  # /livez and /readyz; its loops are added when they start


def wire(
    store: Store,
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utcnow,
    runners: Mapping[TaskKind, Runner] | None = None,
) -> Embedded:
    """Build the embedded runtime around an open, migrated store."""
    store = observed_store(store, clock=clock, job_label=job_label())
    broker = observed_broker(MemoryBroker())
    cancels = MemoryCancelSignals()
    guard = url_guard(settings)
    runners = runners if runners is not None else build_runners(http_guard=runner_guard(guard))
    callback_errors = CallbackErrorLog(store, clock)
    hooks = Hooks(url_guard=runner_guard(guard), on_error=callback_errors)
    scheduler = Scheduler(
        store, broker, clock=clock, rand=random.random, make_id=new_id, hooks=hooks
    )
    pool = WorkerPool(
        store,
        broker,
        observed_runners(runners),
        PoolConfig(
            worker_id=embedded_id(),
            queues=embedded_queues(settings),
            concurrency=settings.concurrency,
            # The only pool: claiming ahead can keep no other worker waiting here.
            expected_duration=0.05,
        ),
        clock=clock,
        rand=random.random,
        on_complete=lambda outcomes, done: _wake_if_needed(scheduler, outcomes, done),
        hooks=hooks,
        cancels=cancels,
    )
    services = Services(
        store, broker, wake=scheduler.wake, clock=clock, url_guard=guard.check, cancels=cancels
    )
    facts = FactsSource(store, clock)
    health = Health("embedded", dependencies={"database": store.schema_revision})
    return Embedded(
        store,
        broker,
        scheduler,
        pool,
        services,
        runners,
        hooks,
        cancels,
        callback_errors,
        facts,
        health,
    )


def embedded_queues(settings: Settings) -> tuple[str, ...]:
    """The queues `tickwork up` takes: ``--queues``, else every queue (``*``)."""
    return settings.queues_for((EVERY_QUEUE,))


def embedded_id() -> str:
    """This process's name as a worker and in the registry."""
    return f"{socket.gethostname()}:{os.getpid()}"


def api_app(rt: Embedded, settings: Settings) -> FastAPI:
    """The HTTP API over the runtime's services (idempotency keys live ``idempotency_ttl``),
    with the dashboard at ``/``, which shows the in-process worker pool as a worker."""
    ttl = timedelta(seconds=settings.idempotency_ttl)
    app = create_app(
        rt.services,
        security=Security.over(rt.services, idempotency_ttl=ttl),
        health=rt.health,
        metrics=MetricsEndpoint(rt.facts),
        status=StatusService(rt.store, rt.facts),
    )
    local = WorkerInfo(
        id=embedded_id(), hostname=socket.gethostname(),
        pid=os.getpid(), queues=embedded_queues(settings), concurrency=settings.concurrency,
        started_at=utcnow(), heartbeat_at=utcnow(),
    )  # fmt: skip
    return with_dashboard(app, rt.services, local_worker=local)


def _wake_if_needed(scheduler: Scheduler, outcomes: Sequence[Outcome], done: Completion) -> None:
    """The scheduler must look again when a retry is due later (to sleep until then), when
    downstream tasks became ready that it admits, or when pool slots came free."""
    retry = any(o.state is TaskRunState.UP_FOR_RETRY for o in outcomes)
    if retry or done.waiting or done.pools_freed:
        scheduler.wake()


async def recover_orphans(rt: Embedded, now: datetime) -> int:
    """Task runs left `running` by a previous process: fail them now and retry by policy."""
    total = 0
    while orphans := await rt.store.stale_running(now, 500):
        total += await rt.scheduler.fail_lost(orphans, now, "tickwork restarted while running")
        if len(orphans) < 500:
            break
    return total


async def bootstrap_token(store: Store, settings: Settings) -> None:
    """First start: create an admin token in ``<data_dir>/admin.token`` (0600) and say where."""
    path = await TokenService(store, utcnow).bootstrap(settings.data_dir)
    if path is not None:
        log.info("admin token: %s (the CLI reads it from there; keep it private)", path)
    else:
        log.info("no %s/admin.token: use a token you created (TICKWORK_TOKEN)", settings.data_dir)


async def serve_embedded(settings: Settings) -> None:
    """Run everything until SIGINT/SIGTERM, then drain running tasks and stop."""
    with lock_data_dir(settings.data_dir):
        store = await open_store(settings.effective_database_url)
        try:
            await store.migrate()
            rt = wire(store, settings)
            await bootstrap_token(store, settings)
            await _serve(rt, settings)
        finally:
            await store.close()


async def _serve(rt: Embedded, settings: Settings) -> None:
    orphans = await recover_orphans(rt, utcnow())
    if orphans:
        log.warning("recovered %d task run(s) left running by a previous process", orphans)
    app = api_app(rt, settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    server = DrainingServer(
        config, on_stop=lambda sig: _stopping(sig, rt, settings.grace_for(EMBEDDED_GRACE))
    )
    wid = embedded_id()
    await rt.store.register_worker(
        process_info(wid, "embedded", embedded_queues(settings), settings.concurrency)
    )
    metrics.LEADER.set(1)  # the only scheduler there is
    track_slots(rt.pool, settings.concurrency)
    background = {
        asyncio.create_task(rt.scheduler.run(), name="scheduler"),
        asyncio.create_task(rt.pool.run(), name="worker-pool"),
        asyncio.create_task(
            maintain_history(rt.store, utcnow, HistoryConfig(settings.retention_days or None)),
            name="history",
        ),
        asyncio.create_task(
            registry_beats(rt.store, wid, lambda: rt.pool.active_count), name="registry"
        ),
        asyncio.create_task(warn_unserved(rt.facts, lambda: True), name="unserved-queues"),
    }
    rt.health.loops.extend(background)
    for task in background:
        task.add_done_callback(lambda t: _stop_on_crash(t, server))
    streams = asyncio.create_task(end_streams_on_exit(app, lambda: server.should_exit))
    log.info(
        "tickwork is up: http://%s:%d  (dashboard: http://%s:%d/, data: %s, workers: %d)",
        settings.host,
        settings.port,
        settings.host,
        settings.port,
        settings.data_dir,
        settings.concurrency,
    )
    with server.handling_signals():  # until the drain is over: a 2nd signal stops at once
        try:
            await server.serve()
        finally:
            streams.cancel()
            await rt.pool.drain(settings.grace_for(EMBEDDED_GRACE))
            await rt.hooks.close(HOOKS_GRACE)
            await rt.callback_errors.flush(HOOKS_GRACE)
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await stop_registration(rt.store, wid)
            metrics.LEADER.set(0)
            await rt.broker.close()
            await rt.cancels.close()
            await close_runners(rt.runners)
            capture.uninstall()
    for task in background:
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            raise failure


def _stopping(sig: int, rt: Embedded, grace: float) -> None:
    log.info(
        "%s: stopping; %d running task(s) get up to %g s to finish, the rest are retried "
        "on the next start (press Ctrl-C again to stop at once)",
        signal.Signals(sig).name,
        rt.pool.active_count,
        grace,
    )


def _stop_on_crash(task: asyncio.Task[None], server: uvicorn.Server) -> None:
    if task.cancelled():
        return
    log.error("%s stopped unexpectedly: %r; shutting down", task.get_name(), task.exception())
    server.should_exit = True


def run_embedded(settings: Settings) -> None:
    """Blocking entry point of `tickwork up`."""
    configure_logging(settings.log_format)  # alembic's line per migration is quiet too
    tune_gc()  # the server stack is imported by now: its objects are frozen out of collections
    asyncio.run(serve_embedded(settings))
