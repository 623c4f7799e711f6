"""Shell-task starts per second in one worker process, and where that rate is bound.

    .venv/bin/python bench/shell_starts.py [--tasks 2000] [--concurrency 8] [--rounds 3]

Runs ``true`` as a shell task through the worker's ``ShellRunner`` (own session and process
group under its supervisor, stdout/stderr piped and captured, exit awaited), ``--concurrency``
at a time on one event loop, as a worker's slots do; no store or broker, so this is the
ceiling of the task runtime alone. Each round is measured once that way (``runner``) and once
with plain ``subprocess.Popen`` + ``wait`` on threads (``popen``: fork/exec and reaping only,
no supervisor, no pipes, no event loop), the floor of what starting a process costs here.

Before/after a change to the runner, run this file of both trees in one session, alternating
(see bench/README.md, "Shell starts").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from tickwork.core.model import RetryPolicy, TaskKind, TaskRun, TaskRunState
from tickwork.worker.runners.shell import ShellRunner

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class _Sink:
    def write(self, stream: str, data: str) -> None:
        return None


def _task_run(i: int) -> TaskRun:
    return TaskRun(
        id=f"tr{i}",
        run_id=f"r{i}",
        job_id="j",
        job_name="j",
        task_name="main",
        kind=TaskKind.SHELL,
        config={"argv": ["true"]},
        state=TaskRunState.RUNNING,
        attempt=1,
        retry=RetryPolicy(),
        due_at=T0,
        logical_date=T0,
    )


async def _runner_round(tasks: int, concurrency: int) -> float:
    runner, slots, sink = ShellRunner(), asyncio.Semaphore(concurrency), _Sink()
    cancel = asyncio.Event()

    async def one(i: int) -> None:
        async with slots:
            result = await runner.run(_task_run(i), sink, cancel)
            assert result.ok, result

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(tasks)))
    return tasks / (time.perf_counter() - start)


def _in_loop(tasks: int, concurrency: int) -> float:
    return asyncio.run(_runner_round(tasks, concurrency))


def _popen_round(tasks: int, concurrency: int) -> float:
    def one(_: int) -> None:
        subprocess.Popen(["true"], stdin=subprocess.DEVNULL, start_new_session=True).wait()

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as threads:
        list(threads.map(one, range(tasks)))
    return tasks / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"runner": [], "popen": []}
    for _ in range(args.rounds):  # alternating, so drifting load hits every way alike
        rates["runner"].append(_in_loop(args.tasks, args.concurrency))
        rates["popen"].append(_popen_round(args.tasks, args.concurrency))
    for way, values in rates.items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{way:<9} median {statistics.median(values):>7,.0f} starts/s  ({shown})")


if __name__ == "__main__":
    main()
