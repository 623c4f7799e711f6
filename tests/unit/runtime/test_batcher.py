"""The natural batcher: a lone item is written at once, items arriving during a write form the
next batch; with ``linger`` a batch waits a little for company, but never past ``max_batch``
items or a ``close``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tickwork.runtime.batch import Batcher

LONG = 60.0  # a linger no test waits out: the deadlines below are far shorter


class Sink:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.writing = asyncio.Event()

    async def write(self, items: Sequence[int]) -> None:
        self.batches.append(list(items))
        self.writing.set()
        await self.gate.wait()


async def test_a_lone_item_goes_at_once_and_a_write_in_flight_gathers_the_next_batch() -> None:
    sink = Sink()
    batcher = Batcher(sink.write)
    runner = asyncio.ensure_future(batcher.run())
    sink.gate.clear()
    first = batcher.put(1)
    await asyncio.wait_for(sink.writing.wait(), 5)  # the lone item's write is in flight
    later = [batcher.put(n) for n in (2, 3)]
    sink.gate.set()
    await asyncio.wait_for(asyncio.gather(first, *later), 5)
    assert sink.batches == [[1], [2, 3]]
    batcher.close()
    await asyncio.wait_for(runner, 5)


async def test_with_linger_items_that_arrive_meanwhile_share_one_write() -> None:
    sink = Sink()
    batcher = Batcher(sink.write, linger=0.2)
    runner = asyncio.ensure_future(batcher.run())
    futures = [batcher.put(1)]
    await asyncio.sleep(0)  # the batcher is lingering now
    futures += [batcher.put(n) for n in (2, 3)]
    await asyncio.wait_for(asyncio.gather(*futures), 5)
    assert sink.batches == [[1, 2, 3]]
    batcher.close()
    await asyncio.wait_for(runner, 5)


async def test_a_full_batch_does_not_linger() -> None:
    sink = Sink()
    batcher = Batcher(sink.write, max_batch=3, linger=LONG)
    runner = asyncio.ensure_future(batcher.run())
    futures = [batcher.put(1)]
    await asyncio.sleep(0)
    futures += [batcher.put(n) for n in (2, 3)]
    await asyncio.wait_for(asyncio.gather(*futures), 5)
    assert sink.batches == [[1, 2, 3]]
    runner.cancel()


async def test_a_batch_of_enough_items_does_not_linger_and_may_grow_to_max_batch() -> None:
    sink = Sink()
    batcher = Batcher(sink.write, max_batch=10, linger=LONG, enough=2)
    runner = asyncio.ensure_future(batcher.run())
    futures = [batcher.put(1)]
    await asyncio.sleep(0)
    futures += [batcher.put(n) for n in (2, 3)]  # in before the batcher runs again
    await asyncio.wait_for(asyncio.gather(*futures), 5)
    assert sink.batches == [[1, 2, 3]]
    runner.cancel()


async def test_close_writes_a_lingering_batch_at_once() -> None:
    sink = Sink()
    batcher = Batcher(sink.write, linger=LONG)
    runner = asyncio.ensure_future(batcher.run())
    batcher.put_nowait(1)
    await asyncio.sleep(0)
    batcher.close()
    await asyncio.wait_for(runner, 5)
    await asyncio.wait_for(batcher.wait_idle(), 5)
    assert sink.batches == [[1]]


async def test_busy_only_writes_after_a_quiet_spell_at_once_and_lingers_while_writes_come() -> None:
    sink = Sink()
    batcher = Batcher(sink.write, max_batch=10, linger=LONG, enough=3, busy_only=True)
    runner = asyncio.ensure_future(batcher.run())
    await asyncio.wait_for(batcher.put(1), 5)  # nothing written before: no linger
    futures = [batcher.put(2)]  # a write just ended: this one waits for company
    await asyncio.sleep(0.01)
    assert sink.batches == [[1]]
    futures += [batcher.put(n) for n in (3, 4)]  # enough now
    await asyncio.wait_for(asyncio.gather(*futures), 5)
    assert sink.batches == [[1], [2, 3, 4]]
    runner.cancel()
