"""What every runner shares: waiting for work against a timeout and a cancel event."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Any

from tickwork.ports import RunResult
from tickwork.runtime.cancel import CancelSignal

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
    if not work.done():
        if isinstance(cancel, CancelSignal):
            await _first_of(work, timeout, cancel)
        else:
            await _first_of_watched(work, timeout, cancel)
    if work.done():
        return Ending.DONE
    return Ending.CANCELLED if cancel.is_set() else Ending.TIMED_OUT


async def _first_of(work: asyncio.Future[Any], timeout: float | None, cancel: CancelSignal) -> None:
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake(*_: object) -> None:
        if not woken.done():
            woken.set_result(None)

    work.add_done_callback(wake)
    cancel.on_set(wake)
    timer = None if timeout is None else loop.call_later(timeout, wake)
    try:
        await woken
    finally:
        work.remove_done_callback(wake)
        cancel.discard(wake)
        if timer is not None:
            timer.cancel()


async def _first_of_watched(
    work: asyncio.Future[Any], timeout: float | None, cancel: asyncio.Event
) -> None:
    watcher = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({work, watcher}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()


def timed_out(timeout: float | None) -> RunResult:
    error = "timed out" if timeout is None else f"timed out after {timeout:g} s"
    return RunResult(ok=False, error=error, timed_out=True)


def ended(ending: Ending, timeout: float | None) -> RunResult:
    """The result of an attempt stopped by ``ending`` (TIMED_OUT or CANCELLED)."""
    return CANCELLED if ending is Ending.CANCELLED else timed_out(timeout)
