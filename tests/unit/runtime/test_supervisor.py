"""``supervise``: the first loop to end stops the others, even one that swallows a cancel."""

from __future__ import annotations

import asyncio

import pytest

from tickwork.runtime.supervisor import supervise


async def _forever() -> None:
    await asyncio.Event().wait()


async def _crash() -> None:
    await asyncio.sleep(0)
    raise RuntimeError("boom")


async def test_a_crashing_loop_stops_the_others_and_its_error_propagates() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        await asyncio.wait_for(supervise({"idle": _forever(), "crash": _crash()}), 5)


async def test_a_loop_that_swallows_a_cancel_is_cancelled_again() -> None:
    swallowed: list[int] = []

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # as a library call racing a shutdown may do
            swallowed.append(1)
        await asyncio.Event().wait()  # only a second cancel ends it

    async def done_soon() -> None:
        await asyncio.sleep(0.01)

    await asyncio.wait_for(supervise({"stubborn": stubborn(), "done": done_soon()}), 5)
    assert swallowed == [1]
