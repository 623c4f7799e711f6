"""Where `tickwork up`'s CPU goes, by part, from a py-spy profile (``--format raw``).

    .venv/bin/py-spy record -p PID -r 250 -f raw --threads -o w1.txt   # during W1
    .venv/bin/python bench/cpu_parts.py w1.txt [--cpu-us-per-job 330]

Each sample goes to the part of its innermost frame that names one (the store also owns its
reader and writer threads), so a store call made by the worker counts as store. With the
process's CPU per job (``server_cpu_us_per_job`` of bench/embedded.py) the shares become µs
per job. "wait" is the thread pools' and the event loop's own waiting frames, which py-spy
does not always tell from work; they are left out of the shares.
"""

from __future__ import annotations

import argparse
from collections import Counter

PARTS = (
    ("store", ("tickwork/store/", "sqlalchemy/", "sqlite3")),
    ("API", ("tickwork/api/", "tickwork/app/", "fastapi/", "starlette/", "uvicorn/", "pydantic")),
    ("scheduler", ("tickwork/scheduler/",)),
    ("worker", ("tickwork/worker/", "tickwork/runtime/", "tickwork/examples", "asyncio-waitpid")),
    ("broker", ("tickwork/broker/",)),
    ("metrics", ("tickwork/observe/", "prometheus_client/")),
)
WAITING = (
    "_worker (concurrent/futures/thread.py",
    "EpollSelector.select (selectors.py",
    # asyncio's thread per task process, blocked in waitpid(2): py-spy counts it as running
    "ThreadedChildWatcher._do_waitpid (asyncio/unix_events.py",
)
STORE_THREADS = ("tickwork-sqlite-", "tickwork-pg")


def part_of(frames: list[str]) -> str:
    store_thread = any(t in frames[0] for t in STORE_THREADS)
    if store_thread and not frames[-1].startswith(WAITING):
        return "store"
    if frames[-1].startswith(WAITING):
        return "wait"
    for frame in reversed(frames):
        for part, marks in PARTS:
            if any(m in frame for m in marks):
                return part
    return "other (event loop, GC, start-up)"


def shares(path: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            counts[part_of(stack.split(";"))] += int(n)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--cpu-us-per-job", type=float, default=0.0)
    args = parser.parse_args()
    counts = shares(args.profile)
    counts.pop("wait", None)
    total = sum(counts.values())
    for part, n in counts.most_common():
        us = f"  {n / total * args.cpu_us_per_job:6.0f} µs/job" if args.cpu_us_per_job else ""
        print(f"{part:<34} {n / total:6.1%}{us}")
    print(f"{'samples':<34} {total}")


if __name__ == "__main__":
    main()
