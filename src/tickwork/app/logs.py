"""Reading a task's captured output a page at a time, for ``Services.logs``."""

from __future__ import annotations

from tickwork.core.errors import ValidationError
from tickwork.core.model import LogChunk, RunDetail, TaskRun
from tickwork.ports import Store

#: Text one log page holds at most (plus one chunk of up to 64 KiB), whatever its ``limit``.
LOG_PAGE_BYTES = 1024 * 1024
LOG_READ_BATCH = 64  # chunks read from the store at a time while a page fills


async def read_log_page(
    store: Store, task_run_id: str, after_seq: int, limit: int
) -> list[LogChunk]:
    """Up to ``limit`` chunks, and no more than ``LOG_PAGE_BYTES`` of text (one chunk, of
    at most 64 KiB, may cross it): read a few chunks at a time, so a page of huge chunks
    never sits whole in memory."""
    chunks: list[LogChunk] = []
    size = 0
    while len(chunks) < limit and size < LOG_PAGE_BYTES:
        batch = await store.read_logs(
            task_run_id, after_seq=after_seq, limit=min(limit - len(chunks), LOG_READ_BATCH)
        )
        for chunk in batch:
            chunks.append(chunk)
            size += len(chunk.data)
            if size >= LOG_PAGE_BYTES:
                break
        if len(batch) < LOG_READ_BATCH or not batch:
            break
        after_seq = chunks[-1].seq
    return chunks


def pick_task_run(detail: RunDetail, task: str | None) -> TaskRun:
    """The task run of ``detail`` named ``task`` (which may be left out when there is one)."""
    if task is None and len(detail.task_runs) == 1:
        return detail.task_runs[0]
    names = [tr.task_name for tr in detail.task_runs]
    for tr in detail.task_runs:
        if tr.task_name == task:
            return tr
    raise ValidationError("task", f"name one of the run's tasks: {', '.join(names)}")
