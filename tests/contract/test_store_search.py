"""Store contract: search filters for jobs and runs, the dead-letter list, job updates."""

from __future__ import annotations

from dataclasses import replace

from tests.contract.factory import T0, at, key, make_job, make_run, outcome
from tickwork.core.model import Job, Schedule, ScheduleKind, TaskRun, TaskRunState
from tickwork.ports import JobFilter, TimeWindow
from tickwork.store import SqlStore


async def _jobs(store: SqlStore, *jobs: Job) -> list[Job]:
    await store.create_jobs([(j, []) for j in jobs])
    return list(jobs)


async def _names(store: SqlStore, where: JobFilter, limit: int = 100) -> list[str]:
    return [j.name for j in await store.list_jobs(limit=limit, where=where)]


async def test_list_jobs_filters_by_prefix_exactly(store: SqlStore) -> None:
    names = ["etl-a", "etl-b", "ETL-c", "etl_x", "etlz", "web"]
    await _jobs(store, *(make_job(n) for n in names))
    assert await _names(store, JobFilter(name_prefix="etl-")) == ["etl-a", "etl-b"]
    # `_` and `%` are not wildcards, and case matters.
    assert await _names(store, JobFilter(name_prefix="etl_")) == ["etl_x"]
    assert await _names(store, JobFilter(name_prefix="ETL")) == ["ETL-c"]


async def test_list_jobs_filters_by_tag_paused_and_kind(store: SqlStore) -> None:
    tagged = replace(make_job("a"), tags=("nightly", "db"))
    other_tag = replace(make_job("b"), tags=("nightly-ish",))
    paused_cron = make_job("c", cron="0 * * * *", next_fire_at=at(60), paused=True)
    await _jobs(store, tagged, other_tag, paused_cron, make_job("d"))
    assert await _names(store, JobFilter(tag="nightly")) == ["a"]
    assert await _names(store, JobFilter(tag="db")) == ["a"]
    assert await _names(store, JobFilter(paused=True)) == ["c"]
    assert await _names(store, JobFilter(paused=False)) == ["a", "b", "d"]
    assert await _names(store, JobFilter(schedule_kind="cron")) == ["c"]
    assert await _names(store, JobFilter(schedule_kind="now", tag="nightly-ish")) == ["b"]


async def test_list_jobs_filter_pages_by_name(store: SqlStore) -> None:
    await _jobs(store, *(make_job(f"etl-{i}") for i in range(5)), make_job("web"))
    first = await store.list_jobs(limit=2, where=JobFilter(name_prefix="etl-"))
    rest = await store.list_jobs(limit=10, after=first[-1].name, where=JobFilter("etl-"))
    assert [j.name for j in first + rest] == [f"etl-{i}" for i in range(5)]


async def test_list_runs_windows_bound_logical_date_and_start(store: SqlStore) -> None:
    (job,) = await _jobs(store, make_job())
    runs = [make_run(job, at(i * 60), state=TaskRunState.QUEUED) for i in range(4)]
    await store.create_runs(runs)
    await store.claim([key(runs[1].task_runs[0])], "w1", at(1000))
    await store.claim([key(runs[2].task_runs[0])], "w1", at(2000))
    by_logical = await store.list_runs(window=TimeWindow(logical_from=at(60), logical_to=at(180)))
    assert [r.id for r in by_logical.runs] == [runs[2].run.id, runs[1].run.id]
    by_start = await store.list_runs(window=TimeWindow(started_from=at(1500)))
    assert [r.id for r in by_start.runs] == [runs[2].run.id]
    started = await store.list_runs(window=TimeWindow(started_to=at(3000)))
    assert [r.id for r in started.runs] == [runs[2].run.id, runs[1].run.id]


async def test_list_runs_window_and_cursor_page_through(store: SqlStore) -> None:
    (job,) = await _jobs(store, make_job())
    await store.create_runs([make_run(job, at(i)) for i in range(10)])
    window = TimeWindow(logical_from=at(2), logical_to=at(9))
    seen, cursor = [], None
    while True:
        page = await store.list_runs(limit=3, cursor=cursor, window=window)
        seen += [r.logical_date for r in page.runs]
        if (cursor := page.next_cursor) is None:
            break
    assert seen == [at(i) for i in range(8, 1, -1)]


async def _dead(store: SqlStore, job: Job, seconds: list[int]) -> list[TaskRun]:
    new = [make_run(job, at(s), state=TaskRunState.QUEUED) for s in seconds]
    await store.create_runs(new)
    trs = [n.task_runs[0] for n in new]
    await store.claim([key(tr) for tr in trs], "w1", T0)
    await store.complete(
        [outcome(tr, TaskRunState.FAILED, at(100 + s)) for tr, s in zip(trs, seconds, strict=True)]
    )
    return trs


async def test_dead_letters_newest_first_by_job_with_cursor(store: SqlStore) -> None:
    job_a, job_b = await _jobs(store, make_job("a"), make_job("b"))
    dead_a = await _dead(store, job_a, [1, 2, 3])
    dead_b = await _dead(store, job_b, [4])
    everything = await store.dead_letters(limit=10)
    assert [tr.id for tr in everything.task_runs] == [t.id for t in [*dead_b, *reversed(dead_a)]]
    assert everything.task_runs[0].state is TaskRunState.FAILED
    first = await store.dead_letters(job_id=job_a.id, limit=2)
    assert first.next_cursor is not None
    second = await store.dead_letters(job_id=job_a.id, limit=2, cursor=first.next_cursor)
    assert [tr.id for tr in first.task_runs + second.task_runs] == [t.id for t in reversed(dead_a)]
    assert second.next_cursor is None


async def test_update_job_replaces_definition_and_keeps_pause_and_history(
    store: SqlStore,
) -> None:
    job = make_job("j", cron="0 * * * *", next_fire_at=at(60), paused=True)
    await _jobs(store, job)
    cron = Schedule(kind=ScheduleKind.CRON, cron="*/5 * * * *", timezone="UTC")
    changed = replace(job, schedule=cron, queue="gpu", paused=False, next_fire_at=at(300))
    assert await store.update_job(changed, T0, True)
    stored = await store.get_job("j")
    assert stored is not None
    assert (stored.queue, stored.paused, stored.next_fire_at) == ("gpu", True, at(300))
    assert stored.schedule == cron
    # A second writer holding the old updated_at loses.
    assert not await store.update_job(replace(job, queue="x"), at(-1), False)


async def test_update_job_without_reschedule_keeps_next_fire(store: SqlStore) -> None:
    job = make_job("j", cron="0 * * * *", next_fire_at=at(60))
    await _jobs(store, job)
    stale = replace(job, priority=5, next_fire_at=at(-999), updated_at=at(1))
    assert await store.update_job(stale, T0, False)
    stored = await store.get_job("j")
    assert stored is not None
    assert (stored.priority, stored.next_fire_at, stored.updated_at) == (5, at(60), at(1))
