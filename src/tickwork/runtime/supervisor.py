"""Every background loop is a named task under a supervisor: one crash stops the process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Coroutine
from typing import Any

log = logging.getLogger("tickwork.supervisor")

CANCEL_AGAIN_AFTER = 1.0  # seconds


async def supervise(loops: dict[str, Coroutine[Any, Any, None]]) -> None:
    """Run the named loops until the first one ends; then cancel the rest.

    A loop that raises brings the others down and its exception propagates, so a broken
    component fails loudly instead of leaving a half-working process.
    """
    tasks = {asyncio.create_task(coro, name=name): name for name, coro in loops.items()}
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await _cancel_all(tasks)
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for task, result in zip(tasks, results, strict=True):
        if task not in done or not isinstance(result, BaseException):
            continue
        if not isinstance(result, asyncio.CancelledError):
            log.error("%s crashed: %r", tasks[task], result)
            raise result


async def _cancel_all(tasks: Collection[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended, cancelling again those that did not
    end within a second: a library call that swallows a cancel (seen in redis-py's pipeline
    on Python 3.11, under an ack racing the shutdown) must not hang the process's shutdown.
    """
    pending = set(tasks)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN_AFTER)
        for task in pending:
            log.warning("%s ignored a cancel; cancelling it again", task.get_name())
