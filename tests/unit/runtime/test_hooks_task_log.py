"""``CallbackErrorLog``: failed callbacks as ``system`` lines of their attempt's log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import LogChunk, first_seq
from tickwork.hooks import CallbackErrorLog

AT = datetime(2026, 3, 29, 1, 30, 7, tzinfo=UTC)


class Outage:
    """A log store whose database is down for the first ``failures`` writes."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.written: list[list[LogChunk]] = []

    async def append_logs(self, chunks: Sequence[LogChunk]) -> None:
        await asyncio.sleep(0)
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("database unavailable")
        self.written.append(list(chunks))


async def test_lines_take_the_last_seq_of_their_attempt_and_batch_while_a_write_runs() -> None:
    store = Outage(failures=0)
    error_log = CallbackErrorLog(store, lambda: AT)
    error_log("tr-1", 1, "on_retry callback failed: raised ValueError: no")
    error_log("tr-2", 3, "on_failure callback failed: dropped: shutting down")
    await error_log.flush(1.0)
    assert store.written == [
        [
            LogChunk(
                "tr-1",
                1,
                first_seq(2) - 1,
                "system",
                "on_retry callback failed: raised ValueError: no\n",
                AT,
            ),
            LogChunk(
                "tr-2",
                3,
                first_seq(4) - 1,
                "system",
                "on_failure callback failed: dropped: shutting down\n",
                AT,
            ),
        ]
    ]


async def test_a_failed_write_is_logged_not_raised_and_later_lines_still_go(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Outage(failures=1)
    error_log = CallbackErrorLog(store, lambda: AT)
    error_log("tr-1", 1, "on_success callback failed: timed out after 10 s")
    await error_log.flush(1.0)
    error_log("tr-2", 1, "on_success callback failed: timed out after 10 s")
    await error_log.flush(1.0)
    assert [[c.task_run_id for c in batch] for batch in store.written] == [["tr-2"]]
    assert any(
        r.levelno == logging.WARNING and "not written to task logs" in r.getMessage()
        for r in caplog.records
    )
