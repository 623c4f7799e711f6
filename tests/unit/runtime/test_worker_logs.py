"""The per-attempt log cap: head and tail kept, a note between them, seqs inside the attempt's
range whatever the task prints."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from tests.fixtures.task_runs import make_task_run
from tickwork.core.model import LogChunk, TaskKind, first_seq
from tickwork.worker.logs import DEFAULT_LOG_MAX_BYTES, TaskLog, log_max_bytes

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def make_log(attempt: int = 1, max_bytes: int = 1000) -> tuple[TaskLog, list[LogChunk]]:
    stored: list[LogChunk] = []
    loop = asyncio.get_running_loop()

    def emit(chunk: LogChunk) -> asyncio.Future[None]:
        stored.append(chunk)
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        return done

    task_run = make_task_run(TaskKind.SHELL, {"argv": ["true"]}, attempt=attempt)
    return TaskLog(task_run, emit, lambda: NOW, max_bytes=max_bytes), stored


def text(chunks: list[LogChunk], stream: str | None = None) -> str:
    return "".join(c.data for c in chunks if stream is None or c.stream == stream)


async def test_output_under_the_cap_is_stored_whole() -> None:
    log, stored = make_log(max_bytes=1000)
    log.write("stdout", "a" * 400)
    log.write("stderr", "b" * 100)
    log.close()
    assert text(stored) == "a" * 400 + "b" * 100
    assert log.dropped == 0


async def test_output_over_the_cap_keeps_head_and_tail_with_a_note_between() -> None:
    log, stored = make_log(max_bytes=1000)
    for i in range(1000):
        log.write("stdout", f"{i:04d}\n")  # 5 bytes a line: 5000 bytes in all
    log.write("system", "attempt 1: failed: exit 1\n")
    log.close()
    out = text(stored, "stdout")
    assert out.startswith("0000\n0001\n")
    assert out.endswith("0998\n0999\n")
    assert len(out.encode()) <= 1000
    notes = [c.data for c in stored if c.stream == "system" and "dropped" in c.data]
    assert len(notes) == 1 and f"{log.dropped} bytes of output dropped" in notes[0]
    assert log.dropped == 5000 - len(out.encode())
    # The note sits between the head and the tail; our own line is kept in order.
    streams = [c.stream for c in stored]
    assert streams.index("system") < len(stored) - 1
    assert "attempt 1: failed" in text(stored, "system")


async def test_one_huge_write_keeps_its_start_and_its_end() -> None:
    log, stored = make_log(max_bytes=4096)
    log.write("stdout", "S" * 2048 + "x" * 100_000 + "E" * 2048)
    log.close()
    out = text(stored, "stdout")
    assert out == "S" * 2048 + "E" * 2048
    assert log.dropped == 100_000


async def test_a_million_prints_stay_inside_the_attempts_seq_range() -> None:
    # 2**20 prints used to number into the next attempt's range and wipe its log out.
    log, stored = make_log(attempt=2, max_bytes=DEFAULT_LOG_MAX_BYTES)
    for _ in range((1 << 20) + 10):
        log.write("stdout", "x\n")
    log.write("system", "attempt 2: success\n")
    log.close()
    seqs = [c.seq for c in stored]
    assert len(set(seqs)) == len(seqs)
    assert first_seq(2) <= min(seqs) and max(seqs) < first_seq(3) - 1
    assert text(stored).endswith("x\n") or "success" in text(stored)
    assert log.dropped > 0


def test_the_cap_comes_from_the_task_config() -> None:
    assert log_max_bytes({"argv": ["x"], "log_max_bytes": 8192}) == 8192
    assert log_max_bytes({"argv": ["x"]}) == DEFAULT_LOG_MAX_BYTES
