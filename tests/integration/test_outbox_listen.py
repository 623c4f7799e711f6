"""The leader's LISTEN for outbox commits, on real PostgreSQL.

Every scheduler here polls once an hour (``max_sleep=3600``): a run an outbox commit made due
after the scheduler's first pass can only be dispatched within a test's deadline if the
``NOTIFY`` woke the scheduler, so no assertion depends on timing.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import psycopg
import pytest

from tests.helpers import eventually, make_job, python_task
from tests.pg import libpq_url
from tickwork import outbox
from tickwork.app.settings import Settings
from tickwork.core.model import RunState
from tickwork.core.params import ParamsContract
from tickwork.ids import new_id
from tickwork.ports import Broker, Delivery, Store
from tickwork.scheduler.ha import HAConfig, HAScheduler, ha_scheduler
from tickwork.scheduler.loop import SchedulerConfig
from tickwork.serve.cluster import leads
from tickwork.serve.embedded import Embedded
from tickwork.serve.wiring import wire
from tickwork.store.pg_listen import EnqueueListener
from tickwork.store.sql import SqlStore
from tickwork.worker import capture

pytestmark = pytest.mark.postgres
TASKS = "tests.integration.engine_tasks"
HOURLY_POLL = SchedulerConfig(max_sleep=3600.0)


@pytest.fixture
async def greet(pg_store: SqlStore) -> None:
    job = make_job("greet", now=datetime.now(UTC), task=python_task(f"{TASKS}:hello"))
    job = replace(job, params=ParamsContract({"name": {"type": "string"}}, ("name",)))
    await pg_store.create_jobs([(job, [])])


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as c:
        yield c


@pytest.fixture
async def engine(pg_store: SqlStore, greet: None) -> AsyncIterator[Embedded]:
    rt = wire(pg_store, Settings(concurrency=2), scheduler_config=HOURLY_POLL)
    capture.install()
    tasks = [asyncio.create_task(rt.scheduler.run()), asyncio.create_task(rt.pool.run())]
    yield rt
    await rt.pool.drain(2.0)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    capture.uninstall()


def commit_one(conn: psycopg.Connection, name: str) -> str:
    with conn.transaction():
        return outbox.enqueue(conn, "greet", {"name": name})


async def succeeded(store: Store, run_id: str) -> list[int]:
    """The attempts of ``run_id`` once it succeeded (fails after the deadline otherwise)."""
    d = await eventually(
        lambda: store.get_run(run_id), lambda d: d is not None and d.run.state is RunState.SUCCESS
    )
    assert d is not None
    return [a.attempt for a in d.attempts]


async def listening(listener: EnqueueListener | None, connections: int = 1) -> EnqueueListener:
    assert listener is not None
    await eventually(
        lambda: asyncio.sleep(0, listener),
        lambda x: x.connected and x.connections >= connections,
    )
    return listener


async def test_outbox_commit_wakes_the_leader_long_before_its_poll(
    engine: Embedded, conn: psycopg.Connection
) -> None:
    listener = await listening(engine.listener)
    await eventually(lambda: asyncio.sleep(0, engine.scheduler.passes), lambda n: n >= 1)

    run_id = commit_one(conn, "prompt")

    assert await succeeded(engine.store, run_id) == [1]  # well within the hour's poll
    assert listener.notifications >= 1


async def test_listener_connects_again_after_its_connection_is_killed(
    engine: Embedded, conn: psycopg.Connection
) -> None:
    listener = await listening(engine.listener)
    conn.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid,))
    await listening(listener, connections=2)
    await eventually(lambda: asyncio.sleep(0, engine.scheduler.passes), lambda n: n >= 1)

    run_id = commit_one(conn, "after the cut")

    assert await succeeded(engine.store, run_id) == [1]


def test_sqlite_store_has_no_listener(tmp_path: Any) -> None:
    from tickwork.store.engine import create_engines

    assert SqlStore(create_engines(f"sqlite:///{tmp_path}/t.db")).enqueue_listener() is None


class Counting:
    """A broker that counts what each task run was published as."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.published: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        self.published += [d.task_run_id for d in deliveries]
        await self._broker.publish(deliveries)


class DiesBeforeDispatch:
    """A leader's store that freezes when it is about to queue due work (the process died
    there), and, being dead, releases no lease: the lease has to run out."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.about_to_dispatch = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def mark_queued(self, *args: Any, **kwargs: Any) -> Any:
        self.about_to_dispatch.set()
        await asyncio.Event().wait()

    async def release_lease(self, *args: Any) -> bool:
        return False


def replica(store: Any, broker: Any, listener: EnqueueListener | None) -> HAScheduler:
    assert listener is not None
    return ha_scheduler(
        cast(Store, store),
        cast(Broker, broker),
        holder=f"replica-{new_id()}",
        clock=lambda: datetime.now(UTC),
        rand=random.random,
        make_id=new_id,
        config=HOURLY_POLL,
        ha=HAConfig(ttl=1.0, campaign_every=0.1),
        listen=listener.run,
    )


async def test_leader_dying_between_commit_and_dispatch_new_leader_dispatches_once(
    pg_store: SqlStore, greet: None, conn: psycopg.Connection
) -> None:
    # The workers: the embedded pool on its in-memory broker (its scheduler is not run).
    rt = wire(pg_store, Settings(concurrency=2))
    broker = Counting(rt.broker)
    dying = DiesBeforeDispatch(rt.store)
    old_ear, new_ear = pg_store.enqueue_listener(), pg_store.enqueue_listener()
    old, new = replica(dying, broker, old_ear), replica(rt.store, broker, new_ear)
    capture.install()
    tasks = [asyncio.create_task(rt.pool.run()), asyncio.create_task(old.run())]
    try:
        await listening(old_ear)
        await eventually(lambda: asyncio.sleep(0, old.scheduler.passes), lambda n: n >= 1)
        tasks.append(asyncio.create_task(new.run()))
        assert not leads(new)
        assert new_ear is not None and new_ear.connections == 0  # only the leader listens

        run_id = commit_one(conn, "failover")
        await asyncio.wait_for(dying.about_to_dispatch.wait(), 10)  # woken by the NOTIFY
        tasks[1].cancel()  # the leader dies before queueing anything

        assert await succeeded(rt.store, run_id) == [1]
        assert leads(new)
        detail = await rt.store.get_run(run_id)
        assert detail is not None
        assert broker.published == [detail.task_runs[0].id]  # dispatched exactly once
    finally:
        await rt.pool.drain(2.0)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        capture.uninstall()
