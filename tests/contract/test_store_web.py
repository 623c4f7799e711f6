"""Store contract: the audit log, dashboard sessions and the dashboard's bounded reads."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.contract.factory import at, make_job, make_run, shell_task
from tickwork.core.model import LogChunk, TaskRunState
from tickwork.ids import new_id
from tickwork.ports.web import AuditEntry, WebSession
from tickwork.store import SqlStore


def entry(name: str, action: str, seconds: float) -> AuditEntry:
    stamp = at(seconds)
    made = new_id(int(stamp.timestamp() * 1000))  # ids sort by time, as in the app
    return AuditEntry(made, stamp, "tok1", name, "api", action, "job:x", {"n": 1})


async def test_audit_entries_page_newest_first_and_filter_by_token(store: SqlStore) -> None:
    await store.record_audit([entry("ci", f"a{i}", i) for i in range(5)])
    await store.record_audit([entry("ops", "pause", 9)])
    first = await store.list_audit(limit=3)
    assert [e.action for e in first.entries] == ["pause", "a4", "a3"]
    assert first.next_cursor is not None
    rest = await store.list_audit(limit=3, cursor=first.next_cursor)
    assert [e.action for e in rest.entries] == ["a2", "a1", "a0"]
    assert rest.next_cursor is None
    ops = await store.list_audit(token_name="ops")
    assert [(e.token_name, e.at, dict(e.detail)) for e in ops.entries] == [("ops", at(9), {"n": 1})]


async def test_sessions_expire_and_end(store: SqlStore) -> None:
    live = WebSession("a" * 64, "tok1", "csrf1", at(0), at(100))
    old = WebSession("b" * 64, "tok1", "csrf2", at(0), at(10))
    await store.create_web_session(live)
    await store.create_web_session(old)
    assert await store.get_web_session(live.id, at(50)) == live
    assert await store.get_web_session(old.id, at(50)) is None  # expired
    await store.end_web_session(live.id, at(50))
    assert await store.get_web_session(live.id, at(50)) is None


async def test_dashboard_reads_count_queues_grid_and_dead_letters(store: SqlStore) -> None:
    job = make_job("wf", tasks=[shell_task("a"), shell_task("b", ["a"])])
    await store.create_jobs([(job, [])])
    queued = make_run(job, at(0), state=TaskRunState.QUEUED)
    failed = make_run(job, at(60), state=TaskRunState.FAILED)
    await store.create_runs([queued, failed])

    counts = {c.state: c.count for c in await store.run_state_counts(at(-1))}
    assert counts == {"queued": 1, "failed": 1}
    assert await store.run_state_counts(at(30)) != []
    (depth,) = await store.queue_depths()
    assert (depth.queue, depth.depth, depth.oldest_queued_at) == ("default", 2, at(0))
    assert await store.dead_letter_count(10) == 2
    assert await store.dead_letter_count(1) == 1
    columns = await store.grid(job.id, 10)
    assert [c.run.id for c in columns] == [queued.run.id, failed.run.id]  # oldest first
    assert {t: s for t, (_, s) in columns[1].cells.items()} == {"a": "failed", "b": "failed"}
    strips = await store.recent_run_states([job.id], 1)
    assert [(r.id, r.state) for r in strips[job.id]] == [(failed.run.id, "failed")]
    digest = await store.change_digest()
    assert digest == await store.change_digest()
    assert len(await store.run_digest(queued.run.id)) == 2
    assert await store.failing_now(at(0) - timedelta(days=1), 5) == []  # no finished_at set


async def test_log_tail_reads_the_last_chunks_in_order(store: SqlStore) -> None:
    job = make_job("logs")
    await store.create_jobs([(job, [])])
    nr = make_run(job, at(0))
    await store.create_runs([nr])
    tr = nr.task_runs[0]
    await store.append_logs(
        [LogChunk(tr.id, 1, seq, "stdout", f"line {seq}\n", at(seq)) for seq in range(10)]
    )
    tail = await store.log_tail(tr.id, 3)
    assert [c.seq for c in tail] == [7, 8, 9]
    assert tail[-1].data == "line 9\n"


async def test_recent_run_states_of_many_jobs_in_one_statement(store: SqlStore) -> None:
    made = [make_job(f"j{i}") for i in range(3)]
    await store.create_jobs([(j, []) for j in made])
    await store.create_runs(
        [make_run(j, at(60 * n), state=TaskRunState.SUCCESS) for j in made[:2] for n in range(4)]
    )
    strips = await store.recent_run_states([j.id for j in made], 3)
    assert set(strips) == {j.id for j in made}
    assert strips[made[2].id] == []  # never ran
    for job in made[:2]:
        assert [r.logical_date for r in strips[job.id]] == [at(180), at(120), at(60)]


async def test_cron_jobs_grouped_by_schedule_and_named_by_schedule(store: SqlStore) -> None:
    soon, later = at(60), at(10 * 86400)
    daily = [make_job(f"d{i}", cron="0 9 * * *", next_fire_at=soon) for i in range(3)]
    paused = replace(make_job("p", cron="0 9 * * *", next_fire_at=soon), paused=True)
    bounded = replace(
        make_job("b", cron="0 9 * * *", next_fire_at=soon),
        schedule=replace(daily[0].schedule, start=at(0)),
    )
    far = make_job("far", cron="0 9 * * *", next_fire_at=later)
    hourly = make_job("h", cron="0 * * * *", next_fire_at=soon)
    await store.create_jobs([(j, []) for j in (*daily, paused, bounded, far, hourly)])
    until = at(7 * 86400)
    groups = {
        (g.schedule.cron, g.schedule.start): (g.jobs, g.active)
        for g in await store.cron_schedules_firing_before(until)
    }
    assert groups == {
        ("0 9 * * *", None): (4, 3),
        ("0 9 * * *", at(0)): (1, 1),
        ("0 * * * *", None): (1, 1),
    }
    named = await store.cron_jobs_of([daily[0].schedule], until)
    assert [(j.name, j.paused) for j in named] == [
        ("d0", False), ("d1", False), ("d2", False), ("p", True)
    ]  # fmt: skip
    assert [j.name for j in await store.cron_jobs_of([bounded.schedule], until)] == ["b"]
    assert await store.cron_jobs_of([], until) == []
