"""Store contract: the worker registry behind `tickwork status`."""

from __future__ import annotations

from tests.contract.factory import at
from tickwork.ports import WorkerInfo
from tickwork.store import SqlStore


def worker(wid: str, seen: float) -> WorkerInfo:
    return WorkerInfo(
        id=wid,
        hostname="host-a",
        pid=4242,
        queues=("default", "gpu"),
        concurrency=8,
        started_at=at(0),
        heartbeat_at=at(seen),
    )


async def test_registered_workers_report_heartbeats_and_load(store: SqlStore) -> None:
    await store.register_worker(worker("w1", 0))
    await store.register_worker(worker("w2", 0))

    await store.worker_heartbeat("w1", at(5), running=3)
    await store.worker_heartbeat("w2", at(6), running=0, stopped=True)

    w1, w2 = await store.list_workers()
    assert (w1.id, w1.heartbeat_at, w1.running, w1.stopped_at) == ("w1", at(5), 3, None)
    assert (w2.heartbeat_at, w2.stopped_at) == (at(6), at(6))
    assert w1.queues == ("default", "gpu") and w1.concurrency == 8
    assert [w.id for w in await store.list_workers(seen_since=at(6))] == ["w2"]


async def test_a_restarted_worker_replaces_its_registration(store: SqlStore) -> None:
    await store.register_worker(worker("w1", 0))
    await store.worker_heartbeat("w1", at(1), running=2, stopped=True)

    await store.register_worker(worker("w1", 10))

    (w1,) = await store.list_workers()
    assert (w1.heartbeat_at, w1.running, w1.stopped_at) == (at(10), 0, None)


async def test_forget_drops_only_workers_silent_since_the_cutoff(store: SqlStore) -> None:
    await store.register_worker(worker("old", 0))
    await store.register_worker(worker("new", 100))

    assert await store.forget_workers(at(50)) == 1

    assert [w.id for w in await store.list_workers()] == ["new"]
