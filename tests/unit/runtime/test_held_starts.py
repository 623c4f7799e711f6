"""Held task runs start in batches: the keys asked for while a ``start`` is in flight go
together in the next one, each waiter learns whether its key was still ours, and a failed
batch fails each of its waiters."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence

import pytest

from tickwork.ports import TaskKey
from tickwork.worker.starts import HeldStarts


class Store:
    def __init__(self, given_back: frozenset[TaskKey] = frozenset(), fail: bool = False) -> None:
        self.batches: list[list[TaskKey]] = []
        self.release = asyncio.Event()
        self.given_back = set(given_back)
        self.fail = fail

    async def start(self, keys: Sequence[TaskKey]) -> set[TaskKey]:
        self.batches.append(list(keys))
        await self.release.wait()
        if self.fail:
            raise RuntimeError("database gone")
        return {k for k in keys if k not in self.given_back}


async def test_keys_asked_for_during_a_start_go_together_in_the_next() -> None:
    store = Store(given_back=frozenset({("b", 1)}))
    starts = HeldStarts(store.start)
    first = asyncio.ensure_future(starts.start(("a", 1)))
    await asyncio.sleep(0)  # the first batch is in flight
    later = [asyncio.ensure_future(starts.start((k, 1))) for k in "bcd"]
    await asyncio.sleep(0)
    store.release.set()
    assert await first is True
    assert [await f for f in later] == [False, True, True]
    assert store.batches == [[("a", 1)], [("b", 1), ("c", 1), ("d", 1)]]


async def test_a_failed_batch_fails_each_of_its_waiters() -> None:
    store = Store(fail=True)
    starts = HeldStarts(store.start)
    waiters = [asyncio.ensure_future(starts.start((k, 1))) for k in "ab"]
    store.release.set()
    for waiter in waiters:
        with pytest.raises(RuntimeError, match="database gone"):
            await waiter
    assert store.batches == [[("a", 1), ("b", 1)]]


async def test_a_failed_batch_whose_waiter_was_cancelled_leaves_no_lost_exception() -> None:
    """The waiter gone (its attempt cancelled), the batch's exception is nobody's: asyncio
    must not report it as never retrieved when the future is collected."""
    store = Store(fail=True)
    starts = HeldStarts(store.start)
    lost: list[dict[str, object]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: lost.append(context))
    try:
        waiter = asyncio.ensure_future(starts.start(("a", 1)))
        await asyncio.sleep(0)  # the batch is in flight
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        store.release.set()
        flushing = starts._flushing
        assert flushing is not None
        await flushing
        del waiter, flushing
        starts._waiting.clear()
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert store.batches == [[("a", 1)]]
    assert lost == []


async def test_a_batch_starts_the_held_task_runs_next_in_line_too() -> None:
    store = Store(given_back=frozenset({("y", 1)}))
    line = [("x", 1), ("y", 1), ("a", 1)]
    starts = HeldStarts(store.start, lambda busy: [k for k in line if k not in busy])
    first = asyncio.ensure_future(starts.start(("a", 1)))
    for _ in range(3):  # the batch task starts and sends
        await asyncio.sleep(0)
    assert starts.in_flight
    # x gets its slot while the batch that starts it ahead is in flight: it waits for that
    # batch's answer instead of asking again.
    x = asyncio.ensure_future(starts.start(("x", 1)))
    await asyncio.sleep(0)
    store.release.set()
    assert (await first, await x) == (True, True)
    assert store.batches == [[("a", 1), ("x", 1), ("y", 1)]]


async def test_kick_sends_only_what_is_in_line_and_nothing_when_none_is() -> None:
    store = Store()
    store.release.set()
    line: list[TaskKey] = [("x", 1)]
    starts = HeldStarts(store.start, lambda busy: [k for k in line if k not in busy])
    starts.kick()
    await asyncio.sleep(0.01)
    line.clear()
    starts.kick()
    await asyncio.sleep(0.01)
    assert store.batches == [[("x", 1)]]
    assert not starts.in_flight


async def test_a_failed_batch_started_ahead_fails_the_waiters_it_has() -> None:
    store = Store(fail=True)
    starts = HeldStarts(store.start, lambda busy: [k for k in [("x", 1)] if k not in busy])
    lost: list[dict[str, object]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: lost.append(context))
    try:
        waiter = asyncio.ensure_future(starts.start(("a", 1)))
        store.release.set()
        with pytest.raises(RuntimeError, match="database gone"):
            await waiter
        del waiter
        gc.collect()  # x's future, which no one awaited, is gone: its exception was retrieved
    finally:
        loop.set_exception_handler(None)
    assert store.batches == [[("a", 1), ("x", 1)]]
    assert lost == []
