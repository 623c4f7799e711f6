"""The enqueue listener when the database cannot be reached: it retries with a doubling
delay, never raises (the scheduler's poll is the safety net) and never calls ``wake``."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from tests.helpers import eventually
from tickwork.store.pg_listen import EnqueueListener


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port  # nobody listens once the socket is closed


async def test_unreachable_database_retried_with_backoff_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conninfo = f"host=127.0.0.1 port={closed_port()} user=nobody dbname=none connect_timeout=1"
    listener = EnqueueListener(conninfo, retry_after=0.01, retry_cap=0.04)
    wakes: list[None] = []
    caplog.set_level(logging.WARNING, logger="tickwork.scheduler.listen")
    task = asyncio.create_task(listener.run(lambda: wakes.append(None)))

    def retries() -> list[str]:
        return [r.getMessage() for r in caplog.records if "not listening" in r.getMessage()]

    await eventually(lambda: asyncio.sleep(0, retries()), lambda found: len(found) >= 4)
    assert not task.done()  # still trying: a failure never ends it
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    delays = [message.rsplit(" in ", 1)[1] for message in retries()[:4]]
    assert delays == ["0.01 s", "0.02 s", "0.04 s", "0.04 s"]  # doubling, up to the cap
    assert listener.connections == 0 and not listener.connected and wakes == []
