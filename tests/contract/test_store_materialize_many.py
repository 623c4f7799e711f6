"""``materialize_many``: many jobs' cron fires in one transaction, each item conditional."""

from __future__ import annotations

from datetime import timedelta

from tests.contract.factory import T0, at, make_job, make_run
from tickwork.core.model import TaskRunState
from tickwork.ports import Materialization
from tickwork.store import SqlStore


async def test_materialize_many_applies_each_item_on_its_own_condition(store: SqlStore) -> None:
    jobs = [make_job(f"cron-{i}", cron="*/5 * * * *", next_fire_at=T0) for i in range(3)]
    await store.create_jobs([(job, []) for job in jobs])
    nxt = T0 + timedelta(minutes=5)
    fresh = [make_run(job, T0, state=TaskRunState.QUEUED) for job in jobs]
    items = [
        Materialization(jobs[0].id, T0, nxt, [fresh[0]]),
        Materialization(jobs[1].id, at(-300), nxt, [fresh[1]]),  # stale: another won
        Materialization(jobs[2].id, T0, nxt, [fresh[2]]),
    ]

    queued = await store.materialize_many(items)

    assert {tr.run_id for tr in queued} == {fresh[0].run.id, fresh[2].run.id}
    nexts = {}
    for job in jobs:
        stored = await store.get_job(job.name)
        assert stored is not None
        nexts[job.name] = stored.next_fire_at
    assert nexts == {"cron-0": nxt, "cron-1": T0, "cron-2": nxt}
    assert await store.get_run(fresh[1].run.id) is None


async def test_materialize_many_twice_adds_nothing_the_second_time(store: SqlStore) -> None:
    job = make_job("cron", cron="*/5 * * * *", next_fire_at=T0)
    await store.create_jobs([(job, [])])
    nxt = T0 + timedelta(minutes=5)
    item = Materialization(job.id, T0, nxt, [make_run(job, T0, state=TaskRunState.QUEUED)])

    first = await store.materialize_many([item])
    second = await store.materialize_many([item])

    assert len(first) == 1 and second == []
    assert len((await store.list_runs(job_id=job.id)).runs) == 1
