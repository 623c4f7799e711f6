"""Store contract: captured output appended in batches and read by seq."""

from __future__ import annotations

from tests.contract.factory import at, make_job, make_run
from tickwork.core.model import LogChunk
from tickwork.store import SqlStore


async def _task_run_id(store: SqlStore) -> str:
    job = make_job("logs")
    new_run = make_run(job)
    await store.create_jobs([(job, [new_run])])
    return new_run.task_runs[0].id


def _chunk(task_run_id: str, seq: int, data: str, stream: str = "stdout") -> LogChunk:
    return LogChunk(task_run_id, 1, seq, stream, data, at(seq))


async def test_read_logs_returns_chunks_after_seq_in_order(store: SqlStore) -> None:
    tr = await _task_run_id(store)
    chunks = [_chunk(tr, s, f"line {s}\n", "stderr" if s % 2 else "stdout") for s in range(5)]
    await store.append_logs(list(reversed(chunks[:3])))
    await store.append_logs(chunks[3:])
    assert await store.read_logs(tr) == chunks
    assert await store.read_logs(tr, after_seq=2) == chunks[3:]
    assert await store.read_logs(tr, after_seq=0, limit=2) == chunks[1:3]
    assert await store.read_logs(tr, after_seq=4) == []


async def test_append_logs_ignores_a_chunk_sent_twice(store: SqlStore) -> None:
    tr = await _task_run_id(store)
    first = _chunk(tr, 0, "once")
    await store.append_logs([first])
    await store.append_logs([_chunk(tr, 0, "again"), _chunk(tr, 1, "next")])
    assert [c.data for c in await store.read_logs(tr)] == ["once", "next"]


async def test_read_logs_of_unknown_task_run_is_empty(store: SqlStore) -> None:
    assert await store.read_logs("nope") == []
