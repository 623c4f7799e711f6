"""DAG workflows end to end: the real scheduler and worker pool on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import eventually
from tests.integration.dag_tasks import read_ledger
from tickwork.app.settings import Settings
from tickwork.core.model import (
    Job,
    NewRun,
    Pool,
    RetryPolicy,
    RunDetail,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRunState,
    TriggerRule,
)
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Store
from tickwork.scheduler.loop import deliveries
from tickwork.serve.embedded import Embedded
from tickwork.serve.wiring import wire
from tickwork.worker import capture

S = TaskRunState
T = "tests.integration.dag_tasks"


def now() -> datetime:
    return datetime.now(UTC)


def task(name: str, fn: str, *upstream: str, rule: str = "all_success", **kw: Any) -> Task:
    extra = {k: kw.pop(k) for k in ("pool", "pool_slots", "priority") if k in kw}
    return Task(
        name=name,
        kind=TaskKind.PYTHON,
        config={"target": f"{T}:{fn}", "kwargs": kw},
        upstream=upstream,
        trigger_rule=TriggerRule(rule),
        **extra,
    )


def dag(name: str, *tasks: Task, **job: Any) -> Job:
    t = now()
    return Job(
        id=new_id(),
        name=name,
        schedule=Schedule(kind=ScheduleKind.NOW),
        tasks=tasks,
        created_at=t,
        updated_at=t,
        **job,
    )


@pytest.fixture
async def engine(store: Store) -> AsyncIterator[Embedded]:
    rt = wire(store, Settings(concurrency=4))
    capture.install()
    running = [asyncio.create_task(rt.scheduler.run()), asyncio.create_task(rt.pool.run())]
    yield rt
    await rt.pool.drain(2.0)
    for t in running:
        t.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    capture.uninstall()


async def submit(rt: Embedded, job: Job, *dates: datetime) -> list[NewRun]:
    """What the service layer does: insert (queued roots where nothing gates them), publish."""
    t = now()
    runs = [
        new_run(job, d, trigger=RunTrigger.MANUAL, now=t, make_id=new_id, state=S.QUEUED)
        for d in (dates or (t,))
    ]
    await rt.store.create_jobs([(job, runs)])
    await rt.broker.publish(deliveries([tr for nr in runs for tr in nr.task_runs]))
    rt.scheduler.wake()
    return runs


async def finish(rt: Embedded, nr: NewRun, timeout: float = 15.0) -> RunDetail:
    async def probe() -> RunDetail:
        d = await rt.store.get_run(nr.run.id)
        assert d is not None
        return d

    done = {RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED}
    return await eventually(probe, lambda d: d.run.state in done, timeout=timeout)


def states(d: RunDetail) -> dict[str, TaskRunState]:
    return {tr.task_name: tr.state for tr in d.task_runs}


async def test_etl_passes_results_downstream_in_order(engine: Embedded, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    job = dag(
        "etl",
        task("extract_users", "extract_users"),
        task("extract_orders", "extract_orders"),
        task(
            "join",
            "join",
            "extract_users",
            "extract_orders",
            users={"$result": "extract_users"},
            orders={"$result": "extract_orders"},
        ),
        task("aggregate", "aggregate", "join", rows={"$result": "join"}),
        task("load", "load", "aggregate", totals={"$result": "aggregate"}, ledger=str(ledger)),
    )
    (nr,) = await submit(engine, job)

    d = await finish(engine, nr)

    assert d.run.state is RunState.SUCCESS
    assert set(states(d).values()) == {S.SUCCESS}
    assert read_ledger(ledger) == [{"task": "load", "totals": {"ada": 35, "grace": 12}}]
    by_name = {tr.task_name: tr for tr in d.task_runs}
    for up, down in [("extract_users", "join"), ("join", "aggregate"), ("aggregate", "load")]:
        up_done, down_started = by_name[up].finished_at, by_name[down].started_at
        assert up_done is not None and down_started is not None
        assert up_done <= down_started
    assert by_name["aggregate"].result == '{"ada":35,"grace":12}'


async def test_a_failure_marks_everything_below_upstream_failed_at_once(
    engine: Embedded, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger")
    job = dag(
        "fails",
        task("a", "boom"),
        task("b", "mark", "a", ledger=ledger, label="b"),
        task("c", "mark", "b", ledger=ledger, label="c"),
        task("cleanup", "mark", "c", rule="all_done", ledger=ledger, label="cleanup"),
        task("alert", "mark", "a", rule="one_failed", ledger=ledger, label="alert"),
        retry=RetryPolicy(max_attempts=1),
    )
    (nr,) = await submit(engine, job)

    d = await finish(engine, nr)

    assert states(d) == {
        "a": S.FAILED,
        "b": S.UPSTREAM_FAILED,
        "c": S.UPSTREAM_FAILED,
        "cleanup": S.SUCCESS,
        "alert": S.SUCCESS,
    }
    assert d.run.state is RunState.FAILED
    assert sorted(e["task"] for e in read_ledger(Path(ledger))) == ["alert", "cleanup"]
    # upstream_failed tasks never ran: no attempt is recorded for them.
    failed_ids = {tr.id for tr in d.task_runs if tr.state is S.UPSTREAM_FAILED}
    assert not [a for a in d.attempts if a.task_run_id in failed_ids]


#: rule -> (state of the downstream after one upstream succeeded and one failed,
#:          state after both succeeded)
RULES = {
    "all_success": (S.UPSTREAM_FAILED, S.SUCCESS),
    "all_failed": (S.SKIPPED, S.SKIPPED),
    "all_done": (S.SUCCESS, S.SUCCESS),
    "one_success": (S.SUCCESS, S.SUCCESS),
    "one_failed": (S.SUCCESS, S.SKIPPED),
    "none_failed": (S.UPSTREAM_FAILED, S.SUCCESS),
}


@pytest.mark.parametrize("rule", sorted(RULES))
async def test_every_trigger_rule(engine: Embedded, rule: str) -> None:
    mixed, clean = RULES[rule]
    one_fails = dag(
        f"{rule}-mixed",
        task("up_ok", "ok"),
        task("up_bad", "boom"),
        task("down", "ok", "up_ok", "up_bad", rule=rule),
    )
    both_ok = dag(
        f"{rule}-clean",
        task("up_ok", "ok"),
        task("up_ok2", "ok"),
        task("down", "ok", "up_ok", "up_ok2", rule=rule),
    )
    (first,) = await submit(engine, one_fails)
    (second,) = await submit(engine, both_ok)

    assert states(await finish(engine, first))["down"] is mixed
    assert states(await finish(engine, second))["down"] is clean


async def test_a_branch_skips_the_paths_not_chosen(engine: Embedded, tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger")
    job = dag(
        "branchy",
        task("pick", "choose", names=["left"]),
        task("left", "mark", "pick", ledger=ledger, label="left"),
        task("right", "mark", "pick", ledger=ledger, label="right"),
        task("after_right", "mark", "right", ledger=ledger, label="after_right"),
        task("join", "mark", "left", "after_right", rule="none_failed", ledger=ledger, label="j"),
    )
    (nr,) = await submit(engine, job)

    d = await finish(engine, nr)

    assert states(d) == {
        "pick": S.SUCCESS,
        "left": S.SUCCESS,
        "right": S.SKIPPED,
        "after_right": S.SKIPPED,
        "join": S.SUCCESS,
    }
    assert d.run.state is RunState.SUCCESS
    assert sorted(e["task"] for e in read_ledger(Path(ledger))) == ["j", "left"]


async def test_a_result_over_the_limit_fails_its_task_with_a_clear_error(
    engine: Embedded,
) -> None:
    job = dag("big", task("huge", "big", size=100_000), task("after", "ok", "huge"))
    (nr,) = await submit(engine, job)

    d = await finish(engine, nr)

    by_name = {tr.task_name: tr for tr in d.task_runs}
    assert by_name["huge"].state is S.FAILED
    assert by_name["huge"].error is not None
    assert "over the 65536-byte limit" in by_name["huge"].error
    assert by_name["huge"].result is None
    assert by_name["after"].state is S.UPSTREAM_FAILED


async def test_retrying_a_failed_dag_run_reruns_in_order(engine: Embedded, tmp_path: Path) -> None:
    ledger, marker = tmp_path / "ledger", tmp_path / "marker"
    marker.touch()
    job = dag(
        "retry-dag",
        task("a", "flaky", ledger=str(ledger), marker=str(marker)),
        task("b", "mark", "a", ledger=str(ledger), label="b"),
    )
    (nr,) = await submit(engine, job)
    assert states(await finish(engine, nr)) == {"a": S.FAILED, "b": S.UPSTREAM_FAILED}

    marker.unlink()
    retried = await engine.store.retry_run(nr.run.id, now())
    assert {tr.task_name: tr.state for tr in retried} == {"a": S.SCHEDULED, "b": S.PENDING}
    engine.scheduler.wake()

    d = await finish(engine, nr)
    assert states(d) == {"a": S.SUCCESS, "b": S.SUCCESS}
    assert [e["task"] for e in read_ledger(ledger)] == ["flaky", "flaky", "b"]


async def test_a_pool_never_holds_more_tasks_than_its_slots(
    engine: Embedded, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    await engine.store.set_pool(Pool(name="db", slots=2), now())
    parallel = [
        task(f"q{i}", "hold", pool="db", ledger=str(ledger), label=f"q{i}", seconds=0.15)
        for i in range(6)
    ]
    (nr,) = await submit(engine, dag("pooled", *parallel))

    d = await finish(engine, nr, timeout=30)

    assert d.run.state is RunState.SUCCESS
    entries = read_ledger(ledger)
    assert len(entries) == 6
    assert max_overlap(entries) == 2  # four workers, two slots: the pool is the limit
    usage = await engine.store.get_pool("db")
    assert usage is not None and usage.used == 0


def max_overlap(entries: Sequence[dict[str, Any]]) -> int:
    events = sorted([(e["start"], 1) for e in entries] + [(e["end"], -1) for e in entries])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


async def test_max_active_runs_runs_one_logical_date_at_a_time_oldest_first(
    engine: Embedded, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    job = dag(
        "serial",
        task("work", "hold", ledger=str(ledger), label="work", seconds=0.1),
        max_active_runs=1,
    )
    base = now() - timedelta(hours=3)
    dates = [base + timedelta(hours=h) for h in (2, 0, 1)]
    runs = await submit(engine, job, *dates)

    done = [await finish(engine, nr) for nr in runs]

    assert all(d.run.state is RunState.SUCCESS for d in done)
    entries = read_ledger(ledger)
    assert max_overlap(entries) == 1
    started = sorted(done, key=lambda d: d.task_runs[0].started_at or base)
    assert [d.run.logical_date for d in started] == sorted(dates)


async def test_depends_on_past_waits_for_the_previous_run_to_succeed(
    engine: Embedded, tmp_path: Path
) -> None:
    ledger, marker = tmp_path / "ledger", tmp_path / "marker"
    marker.touch()
    job = dag(
        "past",
        task("step", "flaky", ledger=str(ledger), marker=str(marker)),
        depends_on_past=True,
    )
    first_date = now() - timedelta(days=1)
    first, second = await submit(engine, job, first_date, first_date + timedelta(hours=1))

    assert states(await finish(engine, first)) == {"step": S.FAILED}
    # The next logical date's task waits: its previous run did not succeed.
    d = await engine.store.get_run(second.run.id)
    assert d is not None and states(d) == {"step": S.SCHEDULED}
    assert len(read_ledger(ledger)) == 1

    marker.unlink()
    await engine.store.retry_run(first.run.id, now())
    engine.scheduler.wake()

    assert states(await finish(engine, second)) == {"step": S.SUCCESS}
    assert [e["marker_exists"] for e in read_ledger(ledger)] == [True, False, False]


async def test_retrying_one_failed_task_reopens_the_tasks_it_failed(
    engine: Embedded, tmp_path: Path
) -> None:
    ledger, marker = tmp_path / "ledger", tmp_path / "marker"
    marker.touch()
    job = dag(
        "retry-one",
        task("a", "flaky", ledger=str(ledger), marker=str(marker)),
        task("b", "mark", "a", ledger=str(ledger), label="b"),
        task("c", "mark", "b", ledger=str(ledger), label="c"),
    )
    (nr,) = await submit(engine, job)
    d = await finish(engine, nr)
    assert states(d) == {"a": S.FAILED, "b": S.UPSTREAM_FAILED, "c": S.UPSTREAM_FAILED}

    marker.unlink()
    a = next(tr for tr in d.task_runs if tr.task_name == "a")
    await engine.store.retry_task_run(a.id, now())
    engine.scheduler.wake()

    d = await finish(engine, nr)
    assert states(d) == {"a": S.SUCCESS, "b": S.SUCCESS, "c": S.SUCCESS}
    assert [e["task"] for e in read_ledger(ledger)] == ["flaky", "flaky", "b", "c"]
