"""Every background loop is a named task under a supervisor: one crash stops the process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("tickwork.supervisor")


async def supervise(loops: dict[str, Coroutine[Any, Any, None]]) -> None:
    """Run the named loops until the first one ends; then cancel the rest.

    A loop that raises brings the others down and its exception propagates, so a broken
    component fails loudly instead of leaving a half-working process.
    """
    tasks = {asyncio.create_task(coro, name=name): name for name, coro in loops.items()}
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for task, result in zip(tasks, results, strict=True):
        if task not in done or not isinstance(result, BaseException):
            continue
        if not isinstance(result, asyncio.CancelledError):
            log.error("%s crashed: %r", tasks[task], result)
            raise result
