"""Store contract: a scheduler write carrying a stale fence writes nothing and raises Fenced."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.contract.factory import T0, at, key, make_job, make_run, outcome
from tests.helpers import eventually
from tickwork.core.model import RunState, TaskRunState
from tickwork.ports import Fence, Fenced, Lease, Materialization
from tickwork.store import SqlStore, open_store
from tickwork.store.engine import create_engines
from tickwork.store.fences import hold as hold_fence_row
from tickwork.store.leases import hold_fence
from tickwork.store.pg_dialect import PostgresDialect
from tickwork.store.pg_direct import DirectWriter

NAME = "scheduler"
S = TaskRunState


@dataclass(frozen=True)
class Epochs:
    """The lease as two leaders saw it: ``old`` lost it (expired), ``new`` took it over."""

    old: Fence
    new: Fence


async def _taken_over(store: SqlStore) -> Epochs:
    old = await store.acquire_lease(NAME, "old-leader", 0.2)
    assert old is not None
    new: Lease | None = await eventually(
        lambda: store.acquire_lease(NAME, "new-leader", 30.0), lambda lease: lease is not None
    )
    assert new is not None and new.token > old.token
    return Epochs(old.fence, new.fence)


async def _external_taken_over(store: SqlStore) -> Epochs:
    """Tokens from a lease held outside the database (etcd, ZooKeeper): the store learns of
    the new leader when it checks in, as ``LeaderElection`` does on taking over."""
    old, new = Fence(NAME, 41, external=True), Fence(NAME, 57, external=True)
    await store.check_fence(old)
    await store.check_fence(new)
    return Epochs(old, new)


@pytest.fixture(params=["lease", "external"])
async def epochs(request: pytest.FixtureRequest, store: SqlStore) -> AsyncIterator[Epochs]:
    """The two leaders' fences: from the database's own lease, or from an external one."""
    take_over = _taken_over if request.param == "lease" else _external_taken_over
    yield await take_over(store)


async def _cron_item(store: SqlStore) -> Materialization:
    job = make_job("cron", cron="*/5 * * * *", next_fire_at=T0)
    await store.create_jobs([(job, [])])
    nxt = T0 + timedelta(minutes=5)
    return Materialization(job.id, T0, nxt, [make_run(job, T0, state=S.QUEUED)])


async def test_stale_fence_materializes_nothing_and_the_current_one_does(
    store: SqlStore, epochs: Epochs
) -> None:
    item = await _cron_item(store)

    with pytest.raises(Fenced) as refused:
        await store.materialize_many([item], fence=epochs.old)
    assert refused.value.fence == epochs.old
    with pytest.raises(Fenced):
        await store.materialize(
            item.job_id, item.expected_next, item.new_next, item.runs, fence=epochs.old
        )

    job = await store.get_job("cron")
    assert job is not None and job.next_fire_at == T0
    assert (await store.list_runs()).runs == []
    assert len(await store.materialize_many([item], fence=epochs.new)) == 1


async def test_stale_fence_queues_hands_out_and_requeues_nothing(
    store: SqlStore, epochs: Epochs
) -> None:
    job = make_job("j")
    waiting, queued = make_run(job, at(0)), make_run(job, at(1), state=S.QUEUED)
    await store.create_jobs([(job, [waiting, queued])])
    tr, q = waiting.task_runs[0], queued.task_runs[0]

    with pytest.raises(Fenced):
        await store.mark_queued([key(tr)], at(5), fence=epochs.old)
    with pytest.raises(Fenced):
        await store.queue_ahead([key(tr)], at(-60), fence=epochs.old)
    with pytest.raises(Fenced):
        await store.requeue([key(q)], at(5), fence=epochs.old)

    assert [t.id for t in await store.due_task_runs(at(5), 10)] == [tr.id]
    assert [t.id for t in await store.queued_task_runs(at(5), 10)] == [q.id]
    assert len(await store.mark_queued([key(tr)], at(5), fence=epochs.new)) == 1
    assert await store.requeue([key(q)], at(5), fence=epochs.new) == 1


async def test_stale_fence_reaps_nothing(store: SqlStore, epochs: Epochs) -> None:
    job = make_job("z")
    nr = make_run(job, T0, state=S.QUEUED)
    await store.create_jobs([(job, [nr])])
    (tr,) = await store.claim([key(nr.task_runs[0])], "w1", at(1))
    failed = outcome(tr, S.FAILED, at(60), error="worker lost")

    with pytest.raises(Fenced):
        await store.complete([failed], fence=epochs.old)

    detail = await store.get_run(nr.run.id)
    assert detail is not None
    assert (detail.task_runs[0].state, detail.attempts) == (S.RUNNING, ())
    assert (await store.complete([failed], fence=epochs.new)).applied == [tr.id]


async def test_fence_of_an_expired_lease_nobody_took_is_refused(store: SqlStore) -> None:
    # 1 s: long enough for the first write to land inside the lease on a loaded machine
    # (0.2 s did not, once), short enough to wait out.
    lease = await store.acquire_lease(NAME, "leader", 1.0)
    assert lease is not None
    nothing = [("no-such-task-run", 1)]
    assert await store.mark_queued(nothing, at(0), fence=lease.fence) == []

    async def refused() -> bool:
        try:
            await store.mark_queued(nothing, at(0), fence=lease.fence)
        except Fenced:
            return True
        return False

    assert await eventually(refused, bool)
    with pytest.raises(Fenced):
        await store.mark_queued(nothing, at(0), fence=Fence("no-such-lease", lease.token))


async def test_unique_logical_date_still_stops_a_second_materialization(
    store: SqlStore, epochs: Epochs
) -> None:
    item = await _cron_item(store)
    assert len(await store.materialize_many([item], fence=epochs.new)) == 1
    job = await store.get_job("cron")
    assert job is not None
    # A plan made from the advanced job that still holds the T0 fire: its condition on
    # next_fire_at passes, but the (job, logical date) key refuses the run.
    again = Materialization(job.id, item.new_next or T0, None, [make_run(job, T0, state=S.QUEUED)])
    assert await store.materialize_many([again], fence=epochs.new) == []
    runs = (await store.list_runs()).runs
    assert [(r.logical_date, r.state) for r in runs] == [(T0, RunState.QUEUED)]


async def test_external_fence_row_keeps_the_highest_token_and_refuses_lower_ones(
    store: SqlStore,
) -> None:
    nothing = [("no-such-task-run", 1)]
    first = Fence(NAME, 7, external=True)
    # No row yet: the first token any write carries is taken as the highest, and kept.
    assert await store.mark_queued(nothing, at(0), fence=first) == []
    assert await store.mark_queued(nothing, at(0), fence=first) == []
    await store.check_fence(Fence(NAME, 9, external=True))
    for stale in (first, Fence(NAME, 8, external=True)):
        with pytest.raises(Fenced) as refused:
            await store.check_fence(stale)
        assert refused.value.fence == stale
        with pytest.raises(Fenced):
            await store.mark_queued(nothing, at(0), fence=stale)
    # Rows are per lease name, and apart from the database's own lease of that name.
    await store.check_fence(Fence("other", 1, external=True))
    with pytest.raises(Fenced):
        await store.check_fence(Fence(NAME, 9))


async def test_stale_external_fence_writes_until_the_new_leader_checks_in(
    store: SqlStore,
) -> None:
    # Why LeaderElection checks a new external lease in before it schedules: the store
    # knows a token is stale only once it has seen a higher one.
    job = make_job("j")
    run = make_run(job, at(0))
    await store.create_jobs([(job, [run])])
    old, new = Fence(NAME, 3, external=True), Fence(NAME, 4, external=True)
    assert len(await store.mark_queued([key(run.task_runs[0])], at(1), fence=old)) == 1
    await store.check_fence(new)
    with pytest.raises(Fenced):
        await store.requeue([key(run.task_runs[0])], at(2), fence=old)
    assert await store.requeue([key(run.task_runs[0])], at(2), fence=new) == 1


def _waiting_for_a_lock(url: str) -> bool:
    engines = create_engines(url)
    try:
        with engines.read.connect() as conn:
            waiting = conn.scalar(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            )
        return bool(waiting)
    finally:
        engines.dispose()


@pytest.mark.postgres
async def test_postgres_takeover_waits_for_a_fenced_write_in_flight(pg_url: str) -> None:
    leader, rival = await open_store(pg_url), await open_store(pg_url)
    engines = create_engines(pg_url)
    try:
        await leader.truncate_all()
        lease = await leader.acquire_lease(NAME, "leader", 0.5)
        assert lease is not None
        with engines.write.connect() as conn, conn.begin():
            dialect = PostgresDialect(DirectWriter(engines.write.url))
            hold_fence(conn, dialect, lease.fence)  # a fenced write, begun in time
            # ... and still open after its lease ran out, when a rival tries to take over:
            expired = sa.text("SELECT clock_timestamp() > :at").bindparams(at=lease.expires_at)

            async def lease_ran_out() -> bool:
                return bool(conn.scalar(expired))

            await eventually(lease_ran_out, bool)
            takeover = asyncio.create_task(rival.acquire_lease(NAME, "rival", 30.0))
            await eventually(lambda: asyncio.to_thread(_waiting_for_a_lock, pg_url), bool)
            assert not takeover.done()  # it cannot commit before the fenced write has
        taken = await takeover
        assert taken is not None and taken.token == lease.token + 1
    finally:
        engines.dispose()
        await leader.close()
        await rival.close()


@pytest.mark.postgres
async def test_postgres_takeover_waits_at_most_a_third_of_its_ttl_for_a_frozen_write(
    pg_url: str,
) -> None:
    leader, rival = await open_store(pg_url), await open_store(pg_url)
    engines = create_engines(pg_url)
    ttl = 0.9
    try:
        await leader.truncate_all()
        lease = await leader.acquire_lease(NAME, "leader", 0.3)
        assert lease is not None
        with engines.write.connect() as conn, conn.begin():
            dialect = PostgresDialect(DirectWriter(engines.write.url))
            hold_fence(conn, dialect, lease.fence)  # a leader frozen inside a fenced write
            expired = sa.text("SELECT clock_timestamp() > :at").bindparams(at=lease.expires_at)

            async def lease_ran_out() -> bool:
                return bool(conn.scalar(expired))

            await eventually(lease_ran_out, bool)
            asked = time.monotonic()
            # Bounded: no lease now, rather than one whose ttl the wait used up.
            taken = await asyncio.wait_for(rival.acquire_lease(NAME, "rival", ttl), 10)
            waited = time.monotonic() - asked
            assert taken is None
            assert waited >= ttl / 3 * 0.9
        taken = await rival.acquire_lease(NAME, "rival", ttl)  # the write ended: taken
        assert taken is not None and taken.token == lease.token + 1
    finally:
        engines.dispose()
        await leader.close()
        await rival.close()


@pytest.mark.postgres
async def test_postgres_new_external_token_waits_for_an_older_write_in_flight(
    pg_url: str,
) -> None:
    leader, rival = await open_store(pg_url), await open_store(pg_url)
    engines = create_engines(pg_url)
    old, new = Fence(NAME, 10, external=True), Fence(NAME, 11, external=True)
    try:
        await leader.truncate_all()
        with engines.write.connect() as conn, conn.begin():
            dialect = PostgresDialect(DirectWriter(engines.write.url))
            hold_fence_row(conn, dialect, old)  # the old leader's write, in flight
            takeover = asyncio.create_task(rival.check_fence(new))
            await eventually(lambda: asyncio.to_thread(_waiting_for_a_lock, pg_url), bool)
            assert not takeover.done()  # the new token waits until the old write has ended
        await takeover
        with pytest.raises(Fenced):
            await leader.check_fence(old)
    finally:
        engines.dispose()
        await leader.close()
        await rival.close()
