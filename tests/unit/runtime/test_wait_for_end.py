"""What a runner waits for: its work, its timeout or its cancel signal, whichever comes first,
with the pool's ``CancelSignal`` (callbacks) and with a plain ``asyncio.Event``."""

from __future__ import annotations

import asyncio

import pytest

from tickwork.runtime.cancel import CancelSignal
from tickwork.worker.runners._wait import Ending, wait_for_end

SIGNALS = [CancelSignal, asyncio.Event]


@pytest.mark.parametrize("signal", SIGNALS)
async def test_work_that_finishes_first_is_done(signal: type[asyncio.Event]) -> None:
    cancel, work = signal(), asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(work.set_result, 1)
    assert await wait_for_end(work, 30.0, cancel) is Ending.DONE


@pytest.mark.parametrize("signal", SIGNALS)
async def test_a_cancel_ends_the_wait_and_leaves_the_work_running(
    signal: type[asyncio.Event],
) -> None:
    cancel, work = signal(), asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(cancel.set)
    assert await wait_for_end(work, None, cancel) is Ending.CANCELLED
    assert not work.done()


@pytest.mark.parametrize("signal", SIGNALS)
async def test_the_timeout_ends_the_wait(signal: type[asyncio.Event]) -> None:
    cancel, work = signal(), asyncio.get_running_loop().create_future()
    assert await wait_for_end(work, 0.01, cancel) is Ending.TIMED_OUT
    assert not work.done()


@pytest.mark.parametrize("signal", SIGNALS)
async def test_a_cancel_set_before_counts_even_if_the_work_is_done(
    signal: type[asyncio.Event],
) -> None:
    cancel, work = signal(), asyncio.get_running_loop().create_future()
    cancel.set()
    work.set_result(1)
    assert await wait_for_end(work, None, cancel) is Ending.CANCELLED


async def test_a_finished_wait_leaves_no_callback_behind() -> None:
    cancel, work = CancelSignal(), asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(wait_for_end(work, 30.0, cancel))
    await asyncio.sleep(0)
    work.set_result(1)
    assert await waiting is Ending.DONE
    called: list[int] = []
    cancel.on_set(lambda: called.append(1))
    cancel.set()
    cancel.set()  # once only
    assert called == [1]
    cancel.on_set(lambda: called.append(2))  # already set: at once
    assert called == [1, 2]


async def test_a_cancelled_wait_leaves_the_work_and_the_signal_usable() -> None:
    cancel, work = CancelSignal(), asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(wait_for_end(work, None, cancel))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    called: list[int] = []
    cancel.on_set(lambda: called.append(1))
    cancel.set()
    assert called == [1]
    assert not work.done()
