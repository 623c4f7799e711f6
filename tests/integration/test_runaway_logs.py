"""Runaway output end to end: capped per attempt, refused results kept out of the log, and
log pages bounded in bytes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from tests.helpers import eventually, make_job, python_task, running_engine, shell_task
from tickwork.core.model import LogChunk, RunDetail, RunState, RunTrigger, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Store
from tickwork.scheduler.loop import deliveries
from tickwork.serve.embedded import Embedded

TASKS = "tests.integration.engine_tasks"


@pytest.fixture
async def engine(sqlite_store: Store) -> AsyncIterator[Embedded]:
    async with running_engine(sqlite_store, concurrency=2) as rt:
        yield rt


async def run_to_end(rt: Embedded, task_config: Mapping[str, object], kind: str) -> RunDetail:
    t = datetime.now(UTC)
    base = python_task() if kind == "python" else shell_task("true")
    job = make_job("runaway", now=t, task=replace(base, config=task_config))
    nr = new_run(
        job, t, trigger=RunTrigger.SCHEDULE, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )
    await rt.store.create_jobs([(job, [nr])])
    await rt.broker.publish(deliveries(nr.task_runs))

    async def get() -> RunDetail:
        d = await rt.store.get_run(nr.run.id)
        assert d is not None
        return d

    return await eventually(get, lambda d: d.run.state in {RunState.SUCCESS, RunState.FAILED})


async def all_chunks(store: Store, task_run_id: str) -> list[LogChunk]:
    return await store.read_logs(task_run_id, limit=1_000_000)


async def test_a_shell_task_printing_32_mib_stores_its_head_and_tail(engine: Embedded) -> None:
    config = {"argv": ["sh", "-c", "head -c 33554432 /dev/zero | tr '\\0' x; echo; echo END"]}
    d = await run_to_end(engine, {**config, "log_max_bytes": 1024 * 1024}, "shell")
    assert d.run.state is RunState.SUCCESS
    chunks = await all_chunks(engine.store, d.task_runs[0].id)
    out = "".join(c.data for c in chunks if c.stream == "stdout")
    assert 900 * 1024 < len(out) <= 1024 * 1024
    assert out.startswith("xxxx") and out.endswith("x\nEND\n")
    notes = [c.data for c in chunks if c.stream == "system" and "dropped" in c.data]
    assert len(notes) == 1


async def test_a_result_refused_for_its_size_is_not_written_to_the_log(engine: Embedded) -> None:
    size = 20 * 1024 * 1024
    config = {"target": f"{TASKS}:huge_result", "kwargs": {"size": size}}
    d = await run_to_end(engine, config, "python")
    assert d.run.state is RunState.FAILED
    assert "over the 65536-byte limit" in (d.task_runs[0].error or "")
    logs = "".join(c.data for c in await all_chunks(engine.store, d.task_runs[0].id))
    assert len(logs) < 10_000


async def test_a_log_page_stops_at_about_one_mib(engine: Embedded) -> None:
    config = {"target": f"{TASKS}:chatty", "kwargs": {"lines": 3000, "width": 1100}}  # 3.2 MiB
    d = await run_to_end(engine, config, "python")
    pages, after, total = 0, -1, 0
    while True:
        page = await engine.services.logs(d.run.id, after_seq=after, limit=10_000)
        size = sum(len(c.data) for c in page.chunks)
        assert size <= 1024 * 1024 + 64 * 1024
        if not page.chunks:
            break
        pages, after, total = pages + 1, page.next_after_seq, total + size
    assert pages >= 3
    assert total > 3 * 1024 * 1024
