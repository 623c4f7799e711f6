"""PostgreSQL: the worker's claim, heartbeat and completion run on the event loop's own
connections (``pg_hot``), with no engine transaction, and fall back to the engine's path when
no such connection is free or a run has several task runs (its DAG advances there)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, NoReturn

import psycopg
import pytest
from sqlalchemy.engine import URL

from tests.adapters.test_store_reconnect import _drop_connections
from tests.contract.factory import T0, key, make_job, make_run, outcome, shell_task
from tests.helpers import eventually
from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import Outcome, RunDetail, RunState, TaskRun, TaskRunState
from tickwork.store import SqlStore, open_store, pg_hot
from tickwork.store import engine as engine_module
from tickwork.store import sql as sql_module
from tickwork.store.pg_direct import DirectWriter

pytestmark = pytest.mark.postgres
S = TaskRunState


async def _fresh(url: str) -> SqlStore:
    store = await open_store(url)
    await store.truncate_all()
    return store


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[SqlStore]:
    made = await _fresh(pg_url)
    yield made
    await made.close()


def _no_engine(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any transaction on the engine's threads fails the test from now on."""

    async def refused(_work: Callable[[Any], Any]) -> NoReturn:
        raise AssertionError("took the engine's path")

    for name in ("_write", "_write_alone", "_read"):
        monkeypatch.setattr(store, name, refused)


async def _queued(store: SqlStore, n: int, tasks: int = 1, name: str = "job") -> list[TaskRun]:
    """The first task run of ``n`` queued runs of a job of ``tasks`` independent tasks."""
    job = make_job(name, tasks=[shell_task(f"t{i}") for i in range(tasks)])
    new_runs = [make_run(job, T0 + timedelta(seconds=i), state=S.QUEUED) for i in range(n)]
    await store.create_jobs([(job, new_runs)])
    return [nr.task_runs[0] for nr in new_runs]


async def _run_state(store: SqlStore, tr: TaskRun) -> RunState:
    detail = await store.get_run(tr.run_id)
    assert detail is not None
    return detail.run.state


async def test_a_single_task_run_is_claimed_beaten_and_completed_without_the_engine(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    trs = await _queued(store, 3)
    _no_engine(store, monkeypatch)
    won = await store.claim([key(tr) for tr in trs], "w1", T0)
    assert sorted(tr.id for tr in won) == sorted(tr.id for tr in trs)
    assert {tr.state for tr in won} == {S.RUNNING}
    assert await store.claim([key(trs[0])], "w2", T0) == []  # a duplicate wins nothing
    beat = await store.heartbeat([key(tr) for tr in won], "w1", T0, held=[key(won[0])])
    assert not beat.cancelled and not beat.abandoned
    done = await store.complete(
        [outcome(won[0], S.SUCCESS, T0), outcome(won[1], S.UP_FOR_RETRY, T0, retry_at=T0)]
    )
    assert sorted(done.applied) == sorted([won[0].id, won[1].id])
    assert done.runs_finished == {"success": 1}
    assert (await store.complete([outcome(won[0], S.SUCCESS, T0)])).applied == []  # once only
    monkeypatch.undo()
    assert await _run_state(store, won[0]) == RunState.SUCCESS
    retried = await store.get_task_run(won[1].id)
    assert retried is not None and (retried.state, retried.attempt) == (S.UP_FOR_RETRY, 2)
    history = await store.get_run(won[0].run_id)
    assert history is not None and [a.state for a in history.attempts] == [S.SUCCESS]


async def test_without_a_free_connection_the_engine_does_the_same(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def none_free(url: URL) -> DirectWriter:
        return DirectWriter(url, size=0)

    monkeypatch.setattr(sql_module, "DirectWriter", none_free)
    store = await _fresh(pg_url)
    try:
        trs = await _queued(store, 2)
        won = await store.claim([key(tr) for tr in trs], "w1", T0)
        assert len(won) == 2
        beat = await store.heartbeat([key(won[0]), (won[1].id, 9)], "w1", T0)
        assert beat.abandoned == {(won[1].id, 9)}
        done = await store.complete([outcome(won[0], S.SUCCESS, T0)])
        assert done.applied == [won[0].id] and done.runs_finished == {"success": 1}
        assert await _run_state(store, won[0]) == RunState.SUCCESS
    finally:
        await store.close()


async def test_a_run_of_several_task_runs_is_completed_by_the_engine_in_one_transaction(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = make_job("dag", tasks=[shell_task("a"), shell_task("b", upstream=["a"])])
    made = make_run(job, T0, state=S.QUEUED)
    first, second = made.task_runs
    waiting = dataclasses.replace(second, state=S.PENDING, queued_at=None)
    await store.create_jobs([(job, [dataclasses.replace(made, task_runs=(first, waiting))])])
    single = (await _queued(store, 1))[0]
    won = await store.claim([key(first), key(single)], "w1", T0)
    done = await store.complete([outcome(tr, S.SUCCESS, T0) for tr in won])  # one batch
    assert sorted(done.applied) == sorted([first.id, single.id])
    assert [tr.id for tr in done.queued] == [second.id]  # the DAG advanced (engine's path)
    assert done.runs_finished == {"success": 1}  # the single's run
    for tr in (first, single):
        history = await store.get_run(tr.run_id)
        assert history is not None and len(history.attempts) == 1  # written once, not twice
    assert await _run_state(store, single) == RunState.SUCCESS
    more = await _queued(store, 1, name="more")
    _no_engine(store, monkeypatch)  # the direct connection is sound after all that
    assert [tr.id for tr in await store.claim([key(more[0])], "w1", T0)] == [more[0].id]


async def test_a_busy_direct_connection_the_server_dropped_fails_once_then_is_replaced(
    store: SqlStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    trs = await _queued(store, 2)
    await store.claim([key(trs[0])], "w1", T0)  # a direct connection now sits idle
    monkeypatch.setattr(engine_module, "PG_PING_IDLE", 3600.0)  # never pinged
    assert _drop_connections(pg_url) >= 1
    with pytest.raises(StoreUnavailable):
        await store.claim([key(trs[1])], "w1", T0)
    assert [tr.id for tr in await store.claim([key(trs[1])], "w1", T0)] == [trs[1].id]


async def test_a_driver_error_that_is_no_outage_is_not_retried_as_one(pg_url: str) -> None:
    writer = DirectWriter(engine_module.normalize_url(pg_url))
    try:

        async def bad_sql(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute("SELECT no_such_column FROM task_runs")

        with pytest.raises(Exception) as raised:
            await writer.run(bad_sql)
        assert not isinstance(raised.value, StoreUnavailable)

        async def one(conn: psycopg.AsyncConnection[Any]) -> int:
            row = await (await conn.execute("SELECT 1")).fetchone()
            assert row is not None
            return int(row[0])

        assert await writer.run(one) == 1  # the connection survived the error, or was replaced
    finally:
        await writer.close()


CASES = 6


def _cases(tr: TaskRun) -> list[Outcome]:
    """Every way an attempt ends, with and without what the worker may leave out."""
    end, begun = T0 + timedelta(seconds=5), T0 + timedelta(seconds=1)
    base = Outcome(tr.id, tr.attempt, S.SUCCESS, end)
    return [
        dataclasses.replace(base, started_at=begun, worker_id="w9", result='{"n": 1}'),
        base,  # no start, no worker: the row's are kept
        dataclasses.replace(base, state=S.FAILED, error="boom", exit_code=3, started_at=begun),
        dataclasses.replace(base, state=S.UP_FOR_RETRY, retry_at=end + timedelta(seconds=30)),
        dataclasses.replace(base, state=S.UP_FOR_RETRY, error="again"),  # due at once
        dataclasses.replace(base, state=S.CANCELLED, worker_id="w9", result='{"n": 2}'),
    ][:CASES]


def _seen(detail: RunDetail | None) -> tuple[Any, ...]:
    """A run as stored, without its ids and job (twins differ only in those)."""
    assert detail is not None
    run = dataclasses.replace(detail.run, id="", job_id="", job_name="")
    trs = [
        dataclasses.replace(tr, id="", run_id="", job_id="", job_name="") for tr in detail.task_runs
    ]
    attempts = [dataclasses.replace(a, task_run_id="") for a in detail.attempts]
    return run, trs, attempts


async def test_the_one_statement_completion_writes_what_the_engines_path_writes(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = await _fresh(pg_url)
    monkeypatch.setattr(sql_module, "DirectWriter", lambda url: DirectWriter(url, size=0))
    engine = await open_store(pg_url)
    try:
        mine, theirs = await _queued(direct, CASES), await _queued(direct, CASES, name="twin")
        won = {tr.id: tr for tr in await direct.claim([key(tr) for tr in mine + theirs], "w", T0)}
        twins = [(won[a.id], won[b.id]) for a, b in zip(mine, theirs, strict=True)]
        for k, (a, b) in enumerate(twins):
            one, other = _cases(a)[k], _cases(b)[k]
            done_a = await direct.complete([one])
            done_b = await engine.complete([other])
            assert (done_a.applied, done_b.applied) == ([a.id], [b.id])
            assert done_a.runs_finished == done_b.runs_finished
            assert _seen(await direct.get_run(a.run_id)) == _seen(await direct.get_run(b.run_id))
    finally:
        await engine.close()
        await direct.close()


_QUEUED_INDEX_READS = """
SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes
WHERE indexrelname LIKE 'task\\_runs\\_%%queued\\_at\\_id\\_idx'
"""


async def test_claims_one_at_a_time_read_by_primary_key_not_the_whole_queued_index(
    store: SqlStore, pg_url: str
) -> None:
    # Past psycopg's prepare threshold, PostgreSQL kept planning the claim with the states
    # bound and walked the partial queued index (every queued row) for each task run claimed.
    trs = await _queued(store, 200)
    conn = await psycopg.AsyncConnection.connect(
        engine_module.libpq_conninfo(engine_module.normalize_url(pg_url)), autocommit=True
    )
    try:

        async def index_reads() -> int:
            await conn.execute("SELECT pg_stat_force_next_flush()")
            await conn.execute("SELECT pg_stat_clear_snapshot()")
            row = await (await conn.execute(_QUEUED_INDEX_READS)).fetchone()
            assert row is not None
            return int(row[0])

        before = await index_reads()
        for tr in trs[:20]:
            assert len(await pg_hot.claim(conn, [key(tr)], "w1", T0)) == 1
        assert await index_reads() - before < 20  # was ~190 per claim
    finally:
        await conn.close()


async def test_a_direct_connection_keeps_its_reader_until_the_server_speaks_unasked(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    calls: list[str] = []
    for name in ("add_reader", "remove_reader"):
        method = getattr(loop, name)

        def counted(*args: Any, _method: Any = method, _name: str = name) -> Any:
            calls.append(_name)
            return _method(*args)

        monkeypatch.setattr(loop, name, counted)
    monkeypatch.setattr(engine_module, "PG_PING_IDLE", 3600.0)  # never pinged
    writer = DirectWriter(engine_module.normalize_url(pg_url))

    async def one(conn: psycopg.AsyncConnection[Any]) -> int:
        row = await (await conn.execute("SELECT 1")).fetchone()
        assert row is not None
        return int(row[0])

    try:
        assert await writer.run(one) == 1  # connected (psycopg's waits), then the reader added
        assert calls[-1] == "add_reader"
        calls.clear()
        for _ in range(4):
            assert await writer.run(one) == 1
        assert calls == []  # not added and removed again for each wait

        assert _drop_connections(pg_url) == 1  # the server closes it: readable, nobody waits
        await eventually(lambda: asyncio.sleep(0, calls), lambda c: c[-1] == "remove_reader")
        with pytest.raises(StoreUnavailable):
            await writer.run(one)
        assert await writer.run(one) == 1  # on a new connection
        assert calls[-1] == "add_reader"
    finally:
        await writer.close()
    assert calls[-1] == "remove_reader"  # closed: nothing left registered
