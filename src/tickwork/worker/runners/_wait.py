"""What every runner shares: waiting for work against a timeout and a cancel event."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Any

from tickwork.ports import RunResult

CANCELLED = RunResult(ok=False, error="cancelled", cancelled=True)


class Ending(Enum):
    DONE = "done"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


async def wait_for_end(
    work: asyncio.Future[Any], timeout: float | None, cancel: asyncio.Event
) -> Ending:
    """Wait until ``work`` finishes, ``timeout`` seconds pass or ``cancel`` is set.

    ``work`` is left running on timeout or cancel: stopping it is the caller's business
    (killing a process group differs from cancelling a coroutine).
    """
    if cancel.is_set():
        return Ending.CANCELLED
    watcher = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({work, watcher}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if work.done():
        return Ending.DONE
    return Ending.CANCELLED if cancel.is_set() else Ending.TIMED_OUT


def timed_out(timeout: float | None) -> RunResult:
    error = "timed out" if timeout is None else f"timed out after {timeout:g} s"
    return RunResult(ok=False, error=error, timed_out=True)


def ended(ending: Ending, timeout: float | None) -> RunResult:
    """The result of an attempt stopped by ``ending`` (TIMED_OUT or CANCELLED)."""
    return CANCELLED if ending is Ending.CANCELLED else timed_out(timeout)
