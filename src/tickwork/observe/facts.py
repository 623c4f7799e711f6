"""Facts of the database, read at scrape time and cached briefly: queue depths and oldest
age, workers and their slots, dead letters, the leader.

One ``FactsSource`` per process reads them in a few indexed queries (``FactsStore``,
``WorkerRegistry``, ``LeaseStore``) at most every ``max_age`` seconds, however often
Prometheus or ``tickwork status`` asks. Only the process that leads (or ``tickwork up``)
exports them as metrics, so each series exists once in a cluster.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tickwork.observe import metrics as m
from tickwork.ports import Lease, Store, WorkerInfo
from tickwork.ports.facts import StoreFacts

LEASE = "scheduler"
#: A process silent this long is taken for lost (its registry heartbeat is every 2 s).
LOST_AFTER = timedelta(seconds=15)
#: Missed cron fires this recent make a ``status`` warning.
MISSED_WINDOW = timedelta(hours=1)
#: Seconds a snapshot is served before the database is read again.
MAX_AGE = 10.0


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the database said at ``taken_at``: facts, registered processes, the lease."""

    taken_at: datetime
    facts: StoreFacts
    processes: list[WorkerInfo] = field(default_factory=list)
    lease: Lease | None = None

    def live(self, info: WorkerInfo) -> bool:
        return info.stopped_at is None and self.taken_at - info.heartbeat_at <= LOST_AFTER

    @property
    def workers(self) -> list[WorkerInfo]:
        """Registered processes that run tasks (workers, and ``tickwork up``), not stopped."""
        return [w for w in self.processes if w.kind != "scheduler" and w.stopped_at is None]

    @property
    def schedulers(self) -> list[WorkerInfo]:
        """Registered processes that schedule (replicas, and ``tickwork up``), not stopped."""
        return [w for w in self.processes if w.kind != "worker" and w.stopped_at is None]

    @property
    def leader(self) -> str | None:
        """The live lease's holder; with none, a live ``tickwork up`` (it leads alone)."""
        if self.lease is not None and self.lease.expires_at > self.taken_at:
            return self.lease.holder
        embedded = [w.id for w in self.schedulers if w.kind == "embedded" and self.live(w)]
        return embedded[0] if embedded else None

    def serves(self, queue: str) -> bool:
        """Whether a live worker takes ``queue`` (``*``: every queue)."""
        return any(self.live(w) and (queue in w.queues or "*" in w.queues) for w in self.workers)

    def oldest_age(self, queue: str) -> float | None:
        """Seconds the oldest due or claimable task run of ``queue`` has waited."""
        oldest = [f.oldest for f in self.facts.queues if f.queue == queue and f.oldest is not None]
        return (self.taken_at - min(oldest)).total_seconds() if oldest else None

    def waiting(self) -> dict[str, int]:
        """Due and claimable task runs by queue (what waits for a scheduler or a worker)."""
        found: dict[str, int] = {}
        for f in self.facts.queues:
            if f.state != "running":
                found[f.queue] = found.get(f.queue, 0) + f.count
        return found


class FactsSource:
    """Reads a ``Snapshot`` at most every ``max_age`` seconds; concurrent askers share one
    read."""

    def __init__(
        self,
        store: Store,
        clock: Callable[[], datetime] = _utcnow,
        *,
        max_age: float = MAX_AGE,
        monotonic: Callable[[], float] = time.monotonic,
        lease: Callable[[str], Awaitable[Lease | None]] | None = None,
    ) -> None:
        self._store = store
        # Where the scheduler lease is read: the store, or etcd/ZooKeeper when it lives there.
        # Looked up per call: the OpenAPI document is built over no store at all.
        self._lease = lease or (lambda name: store.get_lease(name))  # noqa: PLW0108
        self._clock = clock
        self._max_age = max_age
        self._monotonic = monotonic
        self._cached: tuple[float, Snapshot] | None = None
        self._lock = asyncio.Lock()

    async def snapshot(self, max_age: float | None = None) -> Snapshot:
        limit = self._max_age if max_age is None else max_age
        async with self._lock:
            if self._cached is not None and self._monotonic() - self._cached[0] < limit:
                return self._cached[1]
            snap = await self._read()
            self._cached = (self._monotonic(), snap)
            return snap

    async def _read(self) -> Snapshot:
        now = self._clock()
        facts, processes, lease = await asyncio.gather(
            self._store.facts(now, now - MISSED_WINDOW),
            self._store.list_workers(),
            self._lease(LEASE),
        )
        return Snapshot(now, facts, processes, lease)


class SnapshotCollector(Collector):
    """The metric families of one snapshot (``tickwork_queue_depth`` and the rest)."""

    def __init__(self, snap: Snapshot, now: datetime) -> None:
        self._snap = snap
        self._now = now

    def collect(self) -> Iterator[Metric]:
        snap = self._snap
        depth = GaugeMetricFamily(
            m.QUEUE_DEPTH,
            "Task runs by queue, priority lane and state (due: waiting to be queued; queued: "
            "waiting for a worker; running).",
            labels=["queue", "lane", "state"],
        )
        for f in snap.facts.queues:
            depth.add_metric([f.queue, str(f.lane), f.state], f.count)
        oldest = GaugeMetricFamily(
            m.QUEUE_OLDEST,
            "Seconds the oldest due or queued task run of a queue has waited.",
            labels=["queue"],
        )
        for queue in sorted({f.queue for f in snap.facts.queues}):
            age = snap.oldest_age(queue)
            if age is not None:
                oldest.add_metric([queue], max(age, 0.0))
        yield depth
        yield oldest
        yield from self._workers()
        yield GaugeMetricFamily(
            m.DEAD_LETTERS,
            "Task runs whose last attempt failed (the dead-letter queue).",
            value=snap.facts.dead_letters,
        )
        yield GaugeMetricFamily(
            m.FACTS_AGE,
            "Seconds since these database facts were read (they are cached).",
            value=(self._now - snap.taken_at).total_seconds(),
        )

    def _workers(self) -> Iterator[Metric]:
        snap = self._snap
        workers = GaugeMetricFamily(
            m.WORKERS, "Worker processes by queue: live or lost.", labels=["queue", "state"]
        )
        slots = GaugeMetricFamily(
            m.QUEUE_SLOTS,
            "Slots of live workers by queue: busy or free.",
            labels=["queue", "state"],
        )
        counts: dict[tuple[str, str], int] = {}
        busy: dict[str, int] = {}
        free: dict[str, int] = {}
        for w in snap.workers:
            state = "live" if snap.live(w) else "lost"
            for queue in w.queues:
                counts[(queue, state)] = counts.get((queue, state), 0) + 1
                if state == "live":
                    busy[queue] = busy.get(queue, 0) + w.running
                    free[queue] = free.get(queue, 0) + max(w.concurrency - w.running, 0)
        for (queue, state), n in sorted(counts.items()):
            workers.add_metric([queue, state], n)
        for queue in sorted(busy):
            slots.add_metric([queue, "busy"], busy[queue])
            slots.add_metric([queue, "free"], free[queue])
        yield workers
        yield slots
