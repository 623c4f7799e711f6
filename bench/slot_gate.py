"""CPU per task of the worker pool's slot gate: ``asyncio.Semaphore`` (before autoscaling)
against ``runtime.slots.Slots`` (resizable), each task entering and leaving its slot once,
with the slots full (tasks queue for them) and free, alternating, medians of the rounds.

Usage: .venv/bin/python bench/slot_gate.py [--tasks 20000] [--slots 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from tickwork.runtime.slots import Slots


async def one_round(gate: Any, tasks: int) -> float:
    async def task() -> None:
        async with gate:
            await asyncio.sleep(0)

    start = time.process_time()
    await asyncio.gather(*(task() for _ in range(tasks)))
    return (time.process_time() - start) / tasks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, limit in (("full", args.slots), ("free", args.tasks)):
            for gate in (asyncio.Semaphore(limit), Slots(limit)):
                key = f"{type(gate).__name__} ({name})"
                results.setdefault(key, []).append(asyncio.run(one_round(gate, args.tasks)))
    for key, values in results.items():
        print(f"{key:22} {statistics.median(values):7.2f} us CPU per task (incl. the task)")


if __name__ == "__main__":
    main()
