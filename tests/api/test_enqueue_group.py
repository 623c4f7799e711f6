"""Group commit of single enqueues (``app/enqueue_group.py``): concurrent ``POST
/jobs/{name}/runs`` share a transaction, each answered with its own result or its own error
(SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import httpx2
import psycopg
import pytest

from tests.api.conftest import error_of
from tests.api.test_enqueue import py_job
from tests.helpers import FakeClock, Wakes
from tests.pg import libpq_url
from tickwork.app.enqueue_group import EnqueueGroups
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.core.errors import Conflict, StoreUnavailable
from tickwork.core.model import Job, NewRun, RunTrigger
from tickwork.core.runs import new_run
from tickwork.ports import Delivery, EnqueueEntry, RunCopy, Store
from tickwork.store import SqlStore

API = "/api/v1"


class Counted:
    """The store, remembering the size of each group ``enqueue_each`` was given."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def enqueue_each(self, entries: Sequence[EnqueueEntry]) -> list[Exception | None]:
        self.sizes.append(len(entries))
        return await self._store.enqueue_each(entries)


@pytest.fixture
def counted(store: Store) -> Counted:
    return Counted(store)


@pytest.fixture
def services(counted: Counted, broker: MemoryBroker, wakes: Wakes, clock: FakeClock) -> Services:
    return Services(cast(Store, counted), broker, wake=wakes, clock=clock)


async def _post_all(api: httpx2.AsyncClient, requests: list[dict[str, Any]]) -> list[Any]:
    return list(await asyncio.gather(*(api.post(**r) for r in requests)))


def _enqueue(job: str, n: int, **extra: Any) -> dict[str, Any]:
    return {"url": f"{API}/jobs/{job}/runs", "json": {"params": {"n": n}}, **extra}


async def _run_count(api: httpx2.AsyncClient, job: str) -> int:
    return len((await api.get(f"{API}/runs", params={"job": job, "limit": 1000})).json()["runs"])


async def test_concurrent_enqueues_share_commits_and_each_get_their_own_run(
    api: httpx2.AsyncClient, counted: Counted, broker: MemoryBroker
) -> None:
    assert (await api.post(f"{API}/jobs", json=py_job())).status_code == 201
    results = await _post_all(api, [_enqueue("work", n) for n in range(20)])
    assert [r.status_code for r in results] == [201] * 20, [r.text for r in results]
    assert len({r.json()["run_id"] for r in results}) == 20
    assert sum(counted.sizes) == 20 and len(counted.sizes) < 20, counted.sizes
    for n, r in enumerate(results):  # each answer is its own run, with its own params
        run = (await api.get(f"{API}/runs/{r.json()['run_id']}")).json()
        assert run["task_runs"][0]["config"]["kwargs"]["n"] == n
        assert [tr["id"] for tr in run["task_runs"]] == r.json()["task_run_ids"]
    published = await broker.consume(["default"], max_items=100, timeout=0.01)
    assert sorted(d.task_run_id for d in published) == sorted(
        r.json()["task_run_ids"][0] for r in results
    )


async def test_a_bad_request_among_good_ones_fails_alone(api: httpx2.AsyncClient) -> None:
    assert (await api.post(f"{API}/jobs", json=py_job())).status_code == 201
    requests = [_enqueue("work", n) for n in range(6)]
    requests[1] = _enqueue("nope", 1)  # no such job
    requests[3] = {"url": f"{API}/jobs/work/runs", "json": {"params": {"b": 3}}}  # undeclared
    requests[4] = {"url": f"{API}/jobs/work/runs", "json": {"params": {"n": "x"}}}  # not int
    results = await _post_all(api, requests)
    assert [r.status_code for r in results] == [201, 404, 201, 422, 422, 201]
    assert error_of(results[3])["field"] == "params.b"
    assert error_of(results[4])["field"] == "params.n"
    assert await _run_count(api, "work") == 3


async def test_idempotency_keys_within_one_group(api: httpx2.AsyncClient, counted: Counted) -> None:
    assert (await api.post(f"{API}/jobs", json=py_job())).status_code == 201
    k1, k2 = {"Idempotency-Key": "k-1"}, {"Idempotency-Key": "k-2"}
    requests = [
        _enqueue("work", 1, headers=k1),
        _enqueue("work", 2, headers=k2),
        _enqueue("work", 1, headers=k1),
        _enqueue("work", 3),
        _enqueue("work", 1, headers=k1),
        _enqueue("work", 2, headers=k2),
        _enqueue("work", 9, headers=k2),  # k-2 with another body
    ]
    results = await _post_all(api, requests)
    _written_once([results[i] for i in (0, 2, 4)])
    assert results[3].status_code == 201
    # k-2: whichever body came first wrote; the requests with the other body are refused.
    same, other = [results[1], results[5]], results[6]
    if other.status_code == 201:
        assert [r.status_code for r in same] == [409, 409]
    else:
        _written_once(same)
        assert other.status_code == 409
        assert error_of(other)["field"] == "Idempotency-Key"
    assert await _run_count(api, "work") == 3  # k-1's, k-2's, and the one without a key
    assert len(counted.sizes) < len(requests), counted.sizes


def _written_once(answers: list[httpx2.Response]) -> None:
    """One request wrote the run, every other one replays its answer byte for byte."""
    assert [r.status_code for r in answers] == [201] * len(answers), [r.text for r in answers]
    assert len({r.content for r in answers}) == 1
    assert sum("idempotent-replayed" not in r.headers for r in answers) == 1


# A trigger that refuses every insert: PostgreSQL's (the store under the ``api`` fixture).
@pytest.mark.parametrize(
    "store_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_a_store_failure_fails_every_caller_of_the_group_and_writes_nothing(
    api: httpx2.AsyncClient, store: SqlStore, store_url: str
) -> None:
    assert store.dialect == "postgresql"
    assert (await api.post(f"{API}/jobs", json=py_job())).status_code == 201
    with psycopg.connect(libpq_url(store_url), autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION tw_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '08006'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER tw_test_refuse BEFORE INSERT ON task_runs "
            "FOR EACH ROW EXECUTE FUNCTION tw_test_refuse()"
        )
        try:
            results = await _post_all(api, [_enqueue("work", n) for n in range(8)])
        finally:
            conn.execute("DROP TRIGGER tw_test_refuse ON task_runs")
            conn.execute("DROP FUNCTION tw_test_refuse()")
    # SQLSTATE 08006 (connection failure) reads as a database that does not answer: 503.
    assert [r.status_code for r in results] == [503] * 8, [r.text for r in results]
    assert await _run_count(api, "work") == 0


# -- the groups themselves, over the real store ------------------------------------------------


async def _job_and_template(api: httpx2.AsyncClient, services: Services) -> tuple[Job, NewRun]:
    assert (await api.post(f"{API}/jobs", json=py_job())).status_code == 201
    job = await services.get_job("work")
    now = services.now()
    template = new_run(job, now, trigger=RunTrigger.ENQUEUE, now=now, make_id=lambda: "t")
    return job, template


def _copy(template: NewRun, run_id: str) -> RunCopy:
    return RunCopy(
        template, run_id, (f"{run_id}-0",), tuple(tr.config for tr in template.task_runs)
    )


async def test_a_group_that_fails_as_a_whole_is_written_again_entry_by_entry(
    api: httpx2.AsyncClient, services: Services, store: Store
) -> None:
    job, template = await _job_and_template(api, services)
    published: list[Delivery] = []

    async def publish(deliveries: Sequence[Delivery]) -> None:
        published.extend(deliveries)

    groups = EnqueueGroups(store, publish, lambda e: [Delivery(e.copies[0].run_id, 1, "q", 0)])
    await groups.write(EnqueueEntry([_copy(template, "taken")], None, job))
    entries = [EnqueueEntry([_copy(template, i)], None, job) for i in ("a", "taken", "b", "c")]
    results = await asyncio.gather(*(groups.write(e) for e in entries), return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["NoneType", "Conflict", "NoneType", "NoneType"]
    assert isinstance(results[1], Conflict)
    assert sorted(d.task_run_id for d in published) == ["a", "b", "c", "taken"]
    # "taken" alone, "a" alone (nothing in flight), the group of the other three failed,
    # then "b" and "c" alone (and "taken" alone, refused)
    assert groups.groups == 4
    runs = (await store.list_runs(job_id=job.id)).runs
    assert sorted(r.id for r in runs) == ["a", "b", "c", "taken"]


async def test_a_store_failure_of_a_group_is_every_callers(
    api: httpx2.AsyncClient, services: Services, store: Store
) -> None:
    job, template = await _job_and_template(api, services)

    class Down:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        async def enqueue_each(self, entries: Sequence[EnqueueEntry]) -> list[Exception | None]:
            raise StoreUnavailable("database unavailable: down for the test")

    async def publish(deliveries: Sequence[Delivery]) -> None:
        raise AssertionError("nothing was written, so nothing is published")

    groups = EnqueueGroups(cast(Store, Down()), publish, lambda e: [])
    entries = [EnqueueEntry([_copy(template, f"r{i}")], None, job) for i in range(5)]
    results = await asyncio.gather(*(groups.write(e) for e in entries), return_exceptions=True)
    assert all(isinstance(r, StoreUnavailable) for r in results), results
    assert groups.groups == 0


async def test_the_next_group_is_written_while_the_previous_one_is_published(
    api: httpx2.AsyncClient, services: Services, store: Store
) -> None:
    job, template = await _job_and_template(api, services)
    gate = asyncio.Event()
    published: list[str] = []

    async def publish(deliveries: Sequence[Delivery]) -> None:
        await gate.wait()  # Redis is slow to answer
        published.extend(d.task_run_id for d in deliveries)

    def deliveries(entry: EnqueueEntry) -> list[Delivery]:
        return [Delivery(c.run_id, 1, "default", 0) for c in entry.copies]

    groups = EnqueueGroups(store, publish, deliveries)
    names = ["alone", "r0", "r1", "r2"]  # the first written alone, the others as one group
    calls = [
        asyncio.ensure_future(groups.write(EnqueueEntry([_copy(template, n)], None, job)))
        for n in names
    ]
    deadline = asyncio.get_running_loop().time() + 10
    while groups.groups < 2:  # both written though the first group's publish has not returned
        assert asyncio.get_running_loop().time() < deadline, groups.groups
        await asyncio.sleep(0.01)
    assert not any(call.done() for call in calls)  # no one answered before its publish
    gate.set()
    await asyncio.gather(*calls)
    assert sorted(published) == sorted(names)
