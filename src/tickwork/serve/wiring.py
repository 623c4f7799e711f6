"""The composition root: every tickwork process is built here from one ``Settings``.

Each builder takes a ``Process`` (``process.py``: what it opened, its named loops, its stop
steps, and ``run_process``, which runs one).

The process kinds (``embedded``, ``scheduler``, ``worker``, ``api``, ``read_api``) are the
``build_*`` functions below; what is particular to each lives beside it in ``embedded.py``,
``cluster.py`` and ``cluster_admin.py``. A new process-wide part (a metrics server, say) is
one builder here that opens it on ``process.stack``, adds its loop with ``process.loop`` and
its stop step with ``process.on_stop``; its setting is a field of ``Settings``.
"""

from __future__ import annotations

import functools
import logging
import os
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import httpx2
from fastapi import FastAPI

from tickwork.api.app import Role, create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.app.settings import EMBEDDED_GRACE, WORKER_GRACE, Settings
from tickwork.app.status import StatusService
from tickwork.broker.memory import MemoryBroker
from tickwork.broker.signals import MemoryCancelSignals
from tickwork.coordination import open_leases
from tickwork.core.errors import TickworkError
from tickwork.core.model import TaskKind
from tickwork.dashboard import with_dashboard
from tickwork.hooks import CallbackErrorLog, Hooks
from tickwork.ids import new_id
from tickwork.observe import metrics
from tickwork.observe.facts import FactsSource
from tickwork.observe.health import Health
from tickwork.observe.http import MetricsEndpoint
from tickwork.observe.logs import set_process_fields
from tickwork.observe.runner import observed_runners
from tickwork.observe.store import observed_broker, observed_store
from tickwork.ports import Broker, CancelSignals, LeaseStore, Runner, Store, WorkerInfo
from tickwork.runtime.retry import through_outages
from tickwork.scheduler.history import HistoryConfig, maintain_history
from tickwork.scheduler.loop import Scheduler, SchedulerConfig
from tickwork.security.files import private_sqlite
from tickwork.security.secrets import SecretCipher, cipher_from, resolve_secrets
from tickwork.security.ssrf import TargetRefused, UrlGuard, parse_allow
from tickwork.serve.api import read_app
from tickwork.serve.autoscale import autoscale, reregister
from tickwork.serve.brokers import open_broker, open_cancels
from tickwork.serve.cluster import (
    keep_campaigning,
    leads,
    scheduler_health,
    scheduler_replica,
    track_leadership,
    worker_id,
)
from tickwork.serve.cluster_admin import leader_live
from tickwork.serve.embedded import (
    EMBEDDED_OUTCOME_LINGER,
    Embedded,
    bootstrap_token,
    embedded_id,
    embedded_queues,
    embedded_scheduler,
    lock_data_dir,
    recover_orphans,
    wake_if_needed,
)
from tickwork.serve.http import http_api, probes
from tickwork.serve.observed import (
    broker_check,
    job_label,
    process_info,
    registry_beats,
    stop_registration,
    track_slots,
    warn_unserved,
)
from tickwork.serve.process import Process
from tickwork.store import SqlStore, open_store
from tickwork.worker import capture
from tickwork.worker.config import PoolConfig
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runners import HttpGuard, RequestRefused, build_runners, close_runners
from tickwork.worker.secret_runner import with_secrets

log = logging.getLogger("tickwork")

HOOKS_GRACE = 5.0  # seconds callbacks still running at shutdown get to finish


S = TypeVar("S")
B = TypeVar("B")


def instrumented(settings: Settings, store: S, broker: B) -> tuple[S, B]:
    """``store`` and ``broker`` measured (``TICKWORK_METRICS=on``, the default), or as they are
    (``off``: what bench/metrics_cost.py compares against; probes, facts and status stay)."""
    if settings.metrics == "off":
        return store, broker
    return observed_store(store, job_label=job_label()), observed_broker(broker)


def runners_of(settings: Settings, runners: Mapping[TaskKind, Runner]) -> Mapping[TaskKind, Runner]:
    """The runners a pool uses: wrapped with the attempt's log context (unless metrics are off)."""
    return runners if settings.metrics == "off" else observed_runners(runners)


def utcnow() -> datetime:
    return datetime.now(UTC)


class BadSetting(TickworkError):
    """A setting (option, environment variable or config file key) tickwork cannot use."""


# -- parts every kind of process may use ---------------------------------------------------------


async def opened_store(process: Process, database_url: str) -> SqlStore:
    store = await open_store(database_url)
    process.on_close(store.close)
    return store


def url_guard(settings: Settings) -> UrlGuard:
    """The SSRF guard of http tasks and callbacks, opened to the networks in ``http_allow``."""
    try:
        return UrlGuard(parse_allow(settings.http_allow))
    except ValueError as exc:
        raise BadSetting(f"http_allow: {exc}") from None


def runner_guard(guard: UrlGuard) -> HttpGuard:
    """``guard`` as the http runner's send-time check (DNS may have changed since saving)."""

    async def check(url: httpx2.URL) -> None:
        try:
            await guard.check(url)
        except TargetRefused as exc:
            raise RequestRefused(str(exc)) from None

    return check


def distributed_broker(process: Process, consumer: str | None = None) -> Broker:
    """Distributed mode's broker: Redis Streams, or RabbitMQ (``broker_url``)."""
    opened = open_broker(process.settings, consumer=consumer)
    process.on_close(opened.close)
    return opened


def distributed_cancels(process: Process) -> CancelSignals:
    opened = open_cancels(process.settings)
    process.on_close(opened.close)
    return opened


def hooks(process: Process, store: Store, guard: UrlGuard, data_dir: Path | None = None) -> Hooks:
    """Callbacks, their failures written into their task runs' logs; both finish at exit.
    Their secret references are resolved with this process's key (see ``cipher_from``)."""
    callback_errors = CallbackErrorLog(store, utcnow)
    process.on_close(callback_errors.flush, HOOKS_GRACE)
    built = Hooks(
        url_guard=runner_guard(guard),
        on_error=callback_errors,
        secrets=functools.partial(resolve_secrets, store, cipher_from(os.environ, data_dir)),
    )
    process.on_close(built.close, HOOKS_GRACE)
    return built


def runners(process: Process, guard: UrlGuard) -> Mapping[TaskKind, Runner]:
    """The task runners, with output capture of python tasks installed for the process."""
    built = build_runners(http_guard=runner_guard(guard))
    capture.install()
    process.stack.callback(capture.uninstall)
    process.on_close(close_runners, built)
    return built


def coordination(process: Process) -> LeaseStore | None:
    """The lease store of etcd or ZooKeeper (``coordination_url``); None: PostgreSQL's."""
    if not process.settings.coordination_url:
        return None
    leases = open_leases(process.settings.coordination_url)
    process.on_close(leases.close)
    return leases


async def register(process: Process, store: Store, info: WorkerInfo) -> None:
    """This process in the registry (`tickwork status`), marked stopped at exit."""
    await through_outages("register", lambda: store.register_worker(info))
    process.on_close(stop_registration, store, info.id)


def api_app(
    services: Services,
    settings: Settings,
    role: Role = "all",
    *,
    health: Health | None = None,
    metrics: MetricsEndpoint | None = None,
    status: StatusService | None = None,
    local_worker: WorkerInfo | None = None,
    cipher: SecretCipher | None = None,
) -> FastAPI:
    """The HTTP API over ``services`` (idempotency keys live ``idempotency_ttl``), with the
    dashboard at ``/`` (pages only for ``role="read"``; ``local_worker``: `tickwork up`'s
    in-process pool, shown as a worker). ``cipher`` encrypts secrets (none: no secrets)."""
    ttl = timedelta(seconds=settings.idempotency_ttl)
    security = Security.over(services, idempotency_ttl=ttl, cipher=cipher)
    app = create_app(
        services, security=security, role=role, health=health, metrics=metrics, status=status
    )
    return with_dashboard(app, services, writable=role != "read", local_worker=local_worker)


# -- the process kinds ---------------------------------------------------------------------------


async def build_api(process: Process, role: Role) -> None:
    """Distributed mode's API: PostgreSQL, with `now` runs and cancels straight to the broker."""
    s = process.settings
    opened = await opened_store(process, s.require_database())
    store, broker = instrumented(s, opened, distributed_broker(process))
    cancels = distributed_cancels(process)
    # No wake: the leader polls every second and hands work to the broker ahead of time.
    services = Services(
        store, broker, clock=utcnow, url_guard=url_guard(s).check, cancels=cancels,
        leader=functools.partial(leader_live, s, store), cron_spread=s.cron_spread,
    )  # fmt: skip
    # `tickwork status` asks the API: the lease is read where the schedulers hold it.
    leases = coordination(process)
    facts = FactsSource(store, utcnow, lease=leases.get_lease if leases else None)
    health = Health(
        "api", dependencies={"database": store.schema_revision, "broker": broker_check(broker)}
    )
    # Distributed: every process needs the same TICKWORK_SECRET_KEY (no key file).
    cipher = cipher_from(os.environ, None)
    app = api_app(
        services, s, role, health=health, status=StatusService(store, facts), cipher=cipher
    )
    http_api(process, app, f"tickwork API ({role})")


async def build_read_api(process: Process) -> None:
    """`tickwork api --role read` beside `tickwork up`. The schema is not migrated: a
    replica follows its primary, which `tickwork up` migrates."""
    store = await opened_store(process, process.settings.effective_database_url)
    http_api(process, read_app(store), "tickwork read API")


def wire(
    store: Store,
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utcnow,
    runners: Mapping[TaskKind, Runner] | None = None,
    hooks: Hooks | None = None,
    scheduler_config: SchedulerConfig | None = None,
) -> Embedded:
    """The embedded runtime around an open, migrated store: an in-process broker and cancel
    signals, one scheduler, one worker pool and the services of the API, measured (metrics).
    Tests build it directly (and run its loops themselves); ``build_embedded`` builds it for
    a process. On PostgreSQL the scheduler also listens for enqueues committed by
    ``tickwork.outbox`` (``Embedded.listener``)."""
    listener = store.enqueue_listener() if isinstance(store, SqlStore) else None
    store, broker = instrumented(settings, store, MemoryBroker())
    cancels = MemoryCancelSignals()
    guard = url_guard(settings)
    pool_id = embedded_id()
    if runners is None:
        runners = build_runners(http_guard=runner_guard(guard))
    cipher = cipher_from(os.environ, settings.data_dir)
    if hooks is None:
        hooks = _embedded_hooks(store, guard, clock, cipher)
    scheduler = Scheduler(
        store, broker, clock=clock, rand=random.random, make_id=new_id, hooks=hooks,
        config=scheduler_config or embedded_scheduler(settings),
        listen=listener.run if listener else None,
    )  # fmt: skip
    # Secrets are resolved (and masked in output) around every runner.
    pool = _embedded_pool(
        store, broker, with_secrets(runners_of(settings, runners), store, cipher), settings,
        pool_id=pool_id, clock=clock, hooks=hooks, cancels=cancels, scheduler=scheduler,
    )  # fmt: skip
    services = Services(
        store, broker, wake=scheduler.wake, clock=clock, url_guard=guard.check, cancels=cancels,
        cron_spread=settings.cron_spread,
    )  # fmt: skip
    facts = FactsSource(store, clock)
    health = Health("embedded", dependencies={"database": store.schema_revision})
    return Embedded(
        store, broker, scheduler, pool, services, cancels, pool_id, facts, health, listener
    )


def _embedded_hooks(
    store: Store, guard: UrlGuard, clock: Callable[[], datetime], cipher: SecretCipher | None
) -> Hooks:
    return Hooks(
        url_guard=runner_guard(guard),
        on_error=CallbackErrorLog(store, clock),
        secrets=functools.partial(resolve_secrets, store, cipher),
    )


def _embedded_pool(
    store: Store,
    broker: Broker,
    runners: Mapping[TaskKind, Runner],
    settings: Settings,
    *,
    pool_id: str,
    clock: Callable[[], datetime],
    hooks: Hooks,
    cancels: CancelSignals,
    scheduler: Scheduler,
) -> WorkerPool:
    return WorkerPool(
        store,
        broker,
        runners,
        PoolConfig(
            worker_id=pool_id,
            queues=embedded_queues(settings),
            concurrency=settings.concurrency,
            # The only pool: claiming ahead can keep no other worker waiting here.
            expected_duration=0.05,
            outcome_linger=EMBEDDED_OUTCOME_LINGER,
        ),
        clock=clock,
        rand=random.random,
        on_complete=lambda outcomes, done: wake_if_needed(scheduler, outcomes, done),
        hooks=hooks,
        cancels=cancels,
    )


async def build_embedded(process: Process) -> None:
    """`tickwork up`: scheduler, worker pool and HTTP API in one process, on the data dir's
    SQLite file unless ``database_url`` names another database."""
    s = process.settings
    process.stack.enter_context(lock_data_dir(s.data_dir))
    private_sqlite(s.effective_database_url)  # 0600 before SQLite creates it
    store = await opened_store(process, s.effective_database_url)
    await store.migrate()
    guard = url_guard(s)
    built_hooks = hooks(process, store, guard, s.data_dir)
    rt = wire(store, s, runners=runners(process, guard), hooks=built_hooks)
    process.on_close(rt.broker.close)
    process.on_close(rt.cancels.close)
    await bootstrap_token(store, s.data_dir)
    orphans = await recover_orphans(rt, utcnow())
    if orphans:
        log.warning("recovered %d task run(s) left running by a previous process", orphans)
    queues = embedded_queues(s)
    await register(process, rt.store, process_info(rt.pool_id, "embedded", queues, s.concurrency))
    metrics.LEADER.set(1)  # the only scheduler there is
    process.stack.callback(metrics.LEADER.set, 0)
    track_slots(rt.pool)
    process.loop("scheduler", rt.scheduler.run())
    process.loop("worker-pool", rt.pool.run())
    history = HistoryConfig(s.retention_days or None)
    process.loop("history", maintain_history(rt.store, utcnow, history))
    process.loop("registry", registry_beats(rt.store, rt.pool_id, lambda: rt.pool.active_count))
    process.loop("unserved-queues", warn_unserved(rt.facts, lambda: True))
    rt.health.loops.extend(process.tasks)  # filled as the loops start
    grace = s.grace_for(EMBEDDED_GRACE)
    process.stop_message = lambda: (
        f"stopping; {rt.pool.active_count} running task(s) get up to {grace:g} s to finish, "
        "the rest are retried on the next start (press Ctrl-C again to stop at once)"
    )
    process.on_stop(lambda: rt.pool.drain(grace))
    local = process_info(rt.pool_id, "embedded", queues, s.concurrency)
    app = api_app(
        rt.services, s, health=rt.health, metrics=MetricsEndpoint(rt.facts),
        status=StatusService(rt.store, rt.facts), local_worker=local,
        cipher=cipher_from(os.environ, s.data_dir),
    )  # fmt: skip
    http_api(process, app, "tickwork")
    log.info("data: %s, %d tasks at once", s.data_dir, s.concurrency)


async def build_scheduler(process: Process) -> None:
    """A scheduler replica of distributed mode: replicas elect one leader on a lease."""
    s = process.settings
    opened = await opened_store(process, s.require_database())
    store, broker = instrumented(s, opened, distributed_broker(process))
    leases = coordination(process)
    built_hooks = hooks(process, store, url_guard(s))
    listener = opened.enqueue_listener()  # outbox commits wake the leader (PostgreSQL NOTIFY)
    replica = scheduler_replica(
        s, store, broker, built_hooks, clock=utcnow, leases=leases,
        listen=listener.run if listener else None,
    )  # fmt: skip
    holder = replica.status.holder
    log.info(
        "scheduler replica %s campaigning (lease TTL %.0f s, in %s)",
        holder,
        s.lease_ttl,
        s.coordination_url.split("://")[0] if leases else "PostgreSQL",
    )
    track_leadership(replica)
    await register(process, store, process_info(holder, "scheduler"))
    facts = FactsSource(store, utcnow, lease=leases.get_lease if leases else None)
    # Cancelling the replica resigns its lease (in its own shutdown), before the store closes.
    process.loop("scheduler", keep_campaigning(replica))
    process.loop("registry", registry_beats(store, holder, lambda: int(leads(replica))))
    process.loop("unserved-queues", warn_unserved(facts, lambda: leads(replica)))
    health = scheduler_health(replica, store, broker)
    health.loops.extend(process.tasks)
    probes(process, health, MetricsEndpoint(facts, lambda: leads(replica)))


async def build_worker(process: Process) -> None:
    """A worker of distributed mode: takes task runs from the broker, records them in
    PostgreSQL."""
    s = process.settings
    wid = worker_id()
    set_process_fields(worker=wid)
    queues = s.queues_for(("default",))
    opened = await opened_store(process, s.require_database())
    store, broker = instrumented(s, opened, distributed_broker(process, consumer=wid))
    cancels = distributed_cancels(process)
    guard = url_guard(s)
    bounds = s.autoscale_bounds
    concurrency = bounds.low if bounds else s.concurrency
    pool = WorkerPool(
        store,
        broker,
        with_secrets(runners_of(s, runners(process, guard)), store, cipher_from(os.environ, None)),
        PoolConfig(worker_id=wid, queues=queues, concurrency=concurrency),
        clock=utcnow,
        rand=random.random,
        hooks=hooks(process, store, guard),
        cancels=cancels,
    )
    info = process_info(wid, "worker", queues, concurrency)
    await register(process, store, info)
    log.info("worker %s taking %s (%s at once)", wid, ",".join(queues), s.autoscale or concurrency)
    track_slots(pool)
    process.loop("worker-pool", pool.run())
    if bounds is not None:
        scaling = autoscale(pool, broker, queues, bounds, on_change=reregister(store, info))
        process.loop("worker-autoscale", scaling)
    process.loop("worker-registry", registry_beats(store, wid, lambda: pool.active_count))
    process.on_stop(lambda: pool.drain(s.grace_for(WORKER_GRACE)))
    health = Health(
        "worker",
        loops=process.tasks,
        dependencies={"database": store.schema_revision, "broker": broker_check(broker)},
        describe=lambda: {"worker": wid, "running": pool.active_count},
    )
    probes(process, health, MetricsEndpoint())
