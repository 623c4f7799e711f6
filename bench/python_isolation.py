"""The cost of running python tasks in task processes vs. inside the worker.

Calls the python runner directly (no store, no broker) with a no-op task, ``--concurrency``
attempts at a time, alternating the two isolations ``--rounds`` times, and prints wall and
CPU time per task: the worker's own CPU, and with ``process`` the task processes' CPU too.

    .venv/bin/python bench/python_isolation.py --tasks 3000 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from tickwork.core.model import RetryPolicy, TaskKind, TaskRun, TaskRunState
from tickwork.ports import Runner
from tickwork.worker.runners.python import PythonRunner
from tickwork.worker.runners.python_process import ProcessPythonRunner

try:  # what the worker pool hands runners
    from tickwork.runtime.cancel import CancelSignal as Cancel
except ImportError:  # a tree from before it (measured through PYTHONPATH)
    Cancel = asyncio.Event  # type: ignore[assignment,misc]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOOP = TaskRun(
    id="tr-1",
    run_id="run-1",
    job_id="job-1",
    job_name="bench",
    task_name="main",
    kind=TaskKind.PYTHON,
    config={"target": "tickwork.examples:noop"},
    state=TaskRunState.RUNNING,
    attempt=1,
    retry=RetryPolicy(),
    due_at=T0,
    logical_date=T0,
)


class NullSink:
    def write(self, stream: str, data: str) -> None:
        return None


def children_cpu(runner: Runner) -> float:
    if not isinstance(runner, ProcessPythonRunner):
        return 0.0
    total = 0
    for pid in runner.pids():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def measure(runner: Runner, tasks: int, concurrency: int) -> tuple[float, float, float]:
    async def some(n: int) -> None:
        for _ in range(n):
            result = await runner.run(NOOP, NullSink(), Cancel())
            assert result.ok, result

    await asyncio.gather(*(some(1) for _ in range(concurrency)))  # warm: processes started
    c0, t0, p0 = children_cpu(runner), time.perf_counter(), time.process_time()
    await asyncio.gather(*(some(tasks // concurrency) for _ in range(concurrency)))
    wall, cpu, child = time.perf_counter() - t0, time.process_time() - p0, children_cpu(runner) - c0
    return wall / tasks * 1e6, cpu / tasks * 1e6, child / tasks * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {"thread": [], "process": []}
    for _ in range(args.rounds):
        for name, rows in results.items():
            runner: PythonRunner | ProcessPythonRunner = (
                PythonRunner() if name == "thread" else ProcessPythonRunner()
            )
            rows.append(await measure(runner, args.tasks, args.concurrency))
            await runner.aclose()
    for name, rows in results.items():
        wall, worker, child = (statistics.median(col) for col in zip(*rows, strict=True))
        print(
            f"{name:8} wall {wall:6.0f} us/task   worker CPU {worker:5.0f} us/task   "
            f"task processes CPU {child:5.0f} us/task   (medians of {len(rows)})"
        )


if __name__ == "__main__":
    asyncio.run(main())
