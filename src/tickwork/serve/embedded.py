"""The parts particular to `tickwork up` (one process on SQLite by default): the data dir's
lock, the runtime record, orphan recovery and the first admin token. The process itself is
built by ``wiring.build_embedded``."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

from tickwork.app.services import Services, utc_now
from tickwork.app.settings import Settings
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import EVERY_QUEUE, MemoryBroker
from tickwork.broker.signals import MemoryCancelSignals
from tickwork.core.errors import TickworkError
from tickwork.core.model import Outcome, TaskRunState
from tickwork.observe.facts import FactsSource
from tickwork.observe.health import Health
from tickwork.ports import Completion, Store
from tickwork.scheduler.loop import Scheduler, SchedulerConfig
from tickwork.security.files import private_dir
from tickwork.store.pg_listen import EnqueueListener
from tickwork.worker.pool import WorkerPool

log = logging.getLogger("tickwork")


class DataDirLocked(TickworkError):
    """Another `tickwork up` already owns this data directory."""


@contextlib.contextmanager
def lock_data_dir(data_dir: Path) -> Iterator[IO[str]]:
    """Hold an exclusive lock on the data dir, so exactly one embedded process uses it.

    That exclusivity is what lets start-up treat every `running` task run as orphaned.
    """
    private_dir(data_dir)  # 0700: it holds the database, admin.token and secret.key
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
    """The parts of a running embedded tickwork, wired together (``wiring.wire``)."""

    store: Store
    broker: MemoryBroker
    scheduler: Scheduler
    pool: WorkerPool
    services: Services
    cancels: MemoryCancelSignals
    pool_id: str  # the worker pool's id (in task runs, and on the dashboard's workers page)
    facts: FactsSource  # the database's facts, for /metrics and status
    health: Health  # /livez and /readyz
    #: The scheduler's LISTEN for outbox enqueues (PostgreSQL only; None on SQLite).
    listener: EnqueueListener | None = None


def embedded_queues(settings: Settings) -> tuple[str, ...]:
    """The queues `tickwork up` takes: ``--queues``, else every queue (``*``)."""
    return settings.queues_for((EVERY_QUEUE,))


#: Seconds of upcoming work `tickwork up`'s scheduler hands to its in-process broker ahead of
#: time (``SchedulerConfig.window``). Without (0, before), every task run waited for a
#: scheduler pass at its instant: reads, a write and the pass's other work (housekeeping every
#: 2 s) between the instant and the claim, so `at` jobs started tens of ms late, and more
#: under load (bench/README.md, "W3"). With it the broker's timer delivers the run at its
#: instant and the claim is the only write left. Short, unlike the distributed 300 s: the
#: broker keeps these in memory, and cron fires are created this far ahead.
EMBEDDED_WINDOW = 10.0


#: Seconds `tickwork up`'s worker pool lets a batch of outcomes wait for more while they
#: keep coming (``PoolConfig.outcome_linger``). Each completion is a write transaction of
#: the one SQLite writer, and a commit rewrites every page it touched in the WAL: with 2
#: slots and no-op tasks, the outcomes that queued during one write were ~4, and W1 spent
#: more of the writer's time on completions than on anything else. Only under load (a lone
#: outcome is written at once), so what waits on a completion, a DAG's next task, waits at
#: most this much more, and only when the pool is busy (bench/README.md, "W1's CPU").
EMBEDDED_OUTCOME_LINGER = 0.005


def embedded_scheduler(settings: Settings) -> SchedulerConfig:
    """The scheduler's settings in `tickwork up`."""
    return SchedulerConfig(cron_spread=settings.cron_spread, window=EMBEDDED_WINDOW)


def embedded_id() -> str:
    """This process's name as a worker and in the registry."""
    return f"{socket.gethostname()}:{os.getpid()}"


def wake_if_needed(scheduler: Scheduler, outcomes: Sequence[Outcome], done: Completion) -> None:
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


async def bootstrap_token(store: Store, data_dir: Path) -> None:
    """First start: create an admin token in ``<data_dir>/admin.token`` (0600) and say where."""
    path = await TokenService(store, utc_now).bootstrap(data_dir)
    if path is not None:
        log.info("admin token: %s (the CLI reads it from there; keep it private)", path)
    else:
        log.info("no %s/admin.token: use a token you created (TICKWORK_TOKEN)", data_dir)
