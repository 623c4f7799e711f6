"""runtime.slots.Slots: a semaphore that grows and shrinks while tasks hold it."""

from __future__ import annotations

import asyncio

from tickwork.runtime.slots import Slots


async def hold(slots: Slots, entered: list[int], n: int, leave: asyncio.Event) -> None:
    async with slots:
        entered.append(n)
        await leave.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)  # let woken tasks run (no time passes)


async def test_growing_lets_waiters_in_and_shrinking_waits_for_holders() -> None:
    slots, leave = Slots(1), asyncio.Event()
    entered: list[int] = []
    tasks = [asyncio.create_task(hold(slots, entered, n, leave)) for n in range(4)]
    await settle()
    assert (entered, slots.used) == ([0], 1)

    slots.resize(3)
    await settle()
    assert (entered, slots.used) == ([0, 1, 2], 3)  # in arrival order

    slots.resize(1)  # nobody running is interrupted
    await settle()
    assert slots.used == 3
    leave.set()
    await asyncio.gather(*tasks)
    assert (entered, slots.used, slots.limit) == ([0, 1, 2, 3], 0, 1)


async def test_a_cancelled_waiter_leaves_its_place_and_no_slot_is_lost() -> None:
    slots, leave = Slots(1), asyncio.Event()
    entered: list[int] = []
    first = asyncio.create_task(hold(slots, entered, 0, leave))
    second = asyncio.create_task(hold(slots, entered, 1, leave))
    third = asyncio.create_task(hold(slots, entered, 2, leave))
    await settle()
    second.cancel()
    await settle()
    leave.set()
    await asyncio.gather(first, third)
    assert second.cancelled()
    assert (entered, slots.used) == ([0, 2], 0)


async def test_a_waiter_cancelled_as_it_is_handed_a_slot_passes_it_on() -> None:
    slots, leave = Slots(1), asyncio.Event()
    entered: list[int] = []
    leave.set()
    async with slots:
        second = asyncio.create_task(hold(slots, entered, 1, leave))
        third = asyncio.create_task(hold(slots, entered, 2, leave))
        await settle()
    second.cancel()  # handed the slot by our exit, cancelled before it ran
    await asyncio.gather(second, third, return_exceptions=True)
    assert (entered, slots.used) == ([2], 0)
