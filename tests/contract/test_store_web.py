"""Store contract: the audit log, dashboard sessions and the dashboard's bounded reads."""

from __future__ import annotations

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
