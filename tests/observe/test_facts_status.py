"""Database facts (queue depths, oldest age, workers, dead letters, missed fires) as metrics
and as ``status`` warnings, on SQLite and PostgreSQL: each moves when the database does."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from tests.helpers import make_job, shell_task
from tickwork.app.status import build_report
from tickwork.core.model import Outcome, RunTrigger, TaskRunState
from tickwork.core.runs import new_run, skipped_run
from tickwork.ids import new_id
from tickwork.observe.facts import FactsSource, Snapshot, SnapshotCollector
from tickwork.ports import Store, WorkerInfo


def now() -> datetime:
    return datetime.now(UTC)


async def queued_in(store: Store, queue: str, count: int, *, at: datetime) -> list[str]:
    job = replace(
        make_job(f"j-{queue}-{new_id()[-10:]}", now=at, task=shell_task("true")), queue=queue
    )
    runs = [
        new_run(
            job,
            at + timedelta(microseconds=i),
            trigger=RunTrigger.MANUAL,
            now=at,
            make_id=new_id,
            state=TaskRunState.QUEUED,
        )
        for i in range(count)
    ]
    await store.create_jobs([(job, runs)])
    return [nr.task_runs[0].id for nr in runs]


def worker(
    wid: str, queues: tuple[str, ...], *, seen: datetime, kind: str = "worker"
) -> WorkerInfo:
    return WorkerInfo(
        id=wid,
        hostname="h",
        pid=1,
        queues=queues,
        concurrency=4,
        started_at=seen,
        heartbeat_at=seen,
        running=1,
        kind=kind,
    )


def samples(snap: Snapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snap, snap.taken_at))
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
    }


async def test_a_queue_with_work_and_no_worker_shows_in_metrics_and_warns(store: Store) -> None:
    t = now() - timedelta(seconds=30)
    await queued_in(store, "gpu", 3, at=t)
    snap = await FactsSource(store).snapshot()

    found = samples(snap)
    assert (
        found[("tickwork_queue_depth", (("lane", "0"), ("queue", "gpu"), ("state", "queued")))] == 3
    )
    age = found[("tickwork_queue_oldest_seconds", (("queue", "gpu"),))]
    assert 29 <= age < 120
    report = build_report(snap, "r")
    codes = {(w.code, w.queue) for w in report.warnings}
    assert ("unserved_queue", "gpu") in codes
    assert ("no_leader", None) in codes  # nothing registered, no lease

    # A worker taking gpu: the warning goes; workers and slots appear by queue.
    await store.register_worker(worker("w1", ("gpu",), seen=now()))
    snap = await FactsSource(store).snapshot()
    report = build_report(snap, "r")
    assert "unserved_queue" not in {w.code for w in report.warnings}
    found = samples(snap)
    assert found[("tickwork_workers", (("queue", "gpu"), ("state", "live")))] == 1
    assert found[("tickwork_worker_slots", (("queue", "gpu"), ("state", "busy")))] == 1
    assert found[("tickwork_worker_slots", (("queue", "gpu"), ("state", "free")))] == 3
    (gpu,) = [q for q in report.queues if q.queue == "gpu"]
    assert (gpu.queued, gpu.workers, gpu.busy, gpu.free) == (3, 1, 1, 3)


async def test_claimed_work_counts_as_running_and_a_silent_worker_as_lost(store: Store) -> None:
    t = now()
    ids = await queued_in(store, "default", 2, at=t)
    await store.claim([(ids[0], 1)], "w-old", t)
    await store.register_worker(worker("w-old", ("default",), seen=t - timedelta(minutes=5)))
    snap = await FactsSource(store).snapshot()
    found = samples(snap)
    key = ("tickwork_queue_depth", (("lane", "0"), ("queue", "default"), ("state", "running")))
    assert found[key] == 1
    assert found[("tickwork_workers", (("queue", "default"), ("state", "lost")))] == 1
    report = build_report(snap, None)
    assert {"lost_workers", "unserved_queue"} <= {w.code for w in report.warnings}


async def test_dead_letters_and_missed_fires_are_counted_and_warned(store: Store) -> None:
    t = now()
    (tid,) = await queued_in(store, "default", 1, at=t)
    await store.claim([(tid, 1)], "w", t)
    failed = Outcome(tid, 1, TaskRunState.FAILED, finished_at=t, started_at=t, error="boom")
    await store.complete([failed])
    job = make_job("cronny", now=t, task=shell_task("true"))
    await store.create_jobs(
        [(job, [skipped_run(job, t - timedelta(minutes=5), now=t, make_id=new_id)])]
    )

    snap = await FactsSource(store).snapshot()
    assert samples(snap)[("tickwork_dead_letters", ())] == 1
    assert snap.facts.missed_fires == 1
    codes = {w.code for w in build_report(snap, None).warnings}
    assert {"dead_letters", "missed_fires"} <= codes


async def test_leader_and_standbys_come_from_the_lease_and_the_registry(store: Store) -> None:
    t = now()
    for wid in ("s1", "s2"):
        await store.register_worker(worker(wid, (), seen=t, kind="scheduler"))
    assert await store.acquire_lease("scheduler", "s2", 30) is not None
    report = build_report(await FactsSource(store).snapshot(), "r9")
    assert report.leader == "s2" and report.epoch is not None
    assert report.standbys == ["s1"]
    assert report.mode == "distributed"
    assert "no_leader" not in {w.code for w in report.warnings}
    assert report.workers == []  # schedulers are not workers


async def test_embedded_process_leads_alone_and_serves_every_queue(store: Store) -> None:
    await queued_in(store, "gpu", 1, at=now())
    await store.register_worker(worker("up", ("*",), seen=now(), kind="embedded"))
    report = build_report(await FactsSource(store).snapshot(), None)
    assert (report.mode, report.leader, report.epoch) == ("embedded", "up", None)
    assert report.warnings == []


async def test_snapshots_are_cached_for_max_age(store: Store) -> None:
    clock = [0.0]
    source = FactsSource(store, max_age=10.0, monotonic=lambda: clock[0])
    first = await source.snapshot()
    await queued_in(store, "q", 1, at=now())
    clock[0] = 5.0
    assert await source.snapshot() is first  # 5 s later: cached, the new row unseen
    clock[0] = 11.0
    later = await source.snapshot()  # 11 s later: read again
    assert later is not first and later.waiting() == {"q": 1}
