"""The process shape every tickwork process shares (``serve.wiring``): stop steps in order
while the loops still run, one exit stack closing in reverse, a loop that ends or crashes
stopping the process."""

from __future__ import annotations

import asyncio

import pytest

from tickwork.app.settings import Settings
from tickwork.serve.process import LoopEnded, Process, serve


async def test_stop_runs_the_stop_steps_in_order_then_closes_in_reverse() -> None:
    events: list[str] = []

    async def loop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            events.append("loop cancelled")

    async def step(name: str) -> None:
        events.append(name)

    async def close(name: str) -> None:
        events.append(f"close {name}")

    async def build(process: Process) -> None:
        process.on_close(close, "store")
        process.on_close(close, "broker")
        process.loop("work", loop())
        process.on_stop(lambda: step("drain"))
        process.on_stop(lambda: step("stop serving"), first=True)
        asyncio.get_running_loop().call_soon(process.stop.set)

    await asyncio.wait_for(serve(Settings(), build), 5)

    assert events == [
        "stop serving",
        "drain",
        "loop cancelled",
        "close broker",
        "close store",
    ]


async def test_a_loop_that_ends_unasked_stops_the_process() -> None:
    closed: list[str] = []

    async def ends() -> None:
        return None

    async def close() -> None:
        closed.append("store")

    async def build(process: Process) -> None:
        process.on_close(close)
        process.loop("fetch", ends())

    with pytest.raises(LoopEnded, match="fetch stopped unexpectedly"):
        await asyncio.wait_for(serve(Settings(), build), 5)
    assert closed == ["store"]


async def test_a_crashing_loop_stops_the_others_and_its_error_propagates() -> None:
    cancelled = asyncio.Event()

    async def crashes() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    async def waits() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    async def build(process: Process) -> None:
        process.loop("crashes", crashes())
        process.loop("waits", waits())

    with pytest.raises(RuntimeError, match="boom"):
        await asyncio.wait_for(serve(Settings(), build), 5)
    assert cancelled.is_set()


async def test_a_failed_build_closes_what_it_opened() -> None:
    closed: list[str] = []

    async def close() -> None:
        closed.append("store")

    async def never() -> None:
        raise AssertionError("a loop of a failed build ran")

    async def build(process: Process) -> None:
        process.on_close(close)
        process.loop("never", never())
        raise ValueError("bad setting")

    with pytest.raises(ValueError, match="bad setting"):
        await serve(Settings(), build)
    assert closed == ["store"]
