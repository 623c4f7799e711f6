"""Where W1's CPU goes by thread: `tickwork up`'s event loop thread, its other threads (the
SQLite writer; the readers, mostly idle) and its task processes, per W1 enqueue job.

    .venv/bin/python bench/w1_threads.py [--jobs 5000] [--rounds 1]

Each thread's user + system time (``/proc/<pid>/task/<tid>/stat``) and its voluntary and
involuntary context switches, before and after ``bench/embedded.py``'s W1 enqueue; exact CPU,
unlike a sampling profiler (py-spy counts a thread preempted in a pipe ``write`` as running).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import embedded

TICK = os.sysconf("SC_CLK_TCK")
Usage = dict[str, list[float]]  # part -> [cpu seconds, voluntary, involuntary switches]


def _read(stat: str, status: str) -> list[float]:
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    text = Path(status).read_text()
    switches = [
        int(text.split(f"{kind}_ctxt_switches:")[1].split()[0])
        for kind in ("voluntary", "nonvoluntary")
    ]
    return [(int(fields[11]) + int(fields[12])) / TICK, *switches]


def usage(pid: int) -> Usage:
    out: Usage = {}
    children: list[str] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            values = _read(f"{base}/stat", f"{base}/status")
            children += Path(f"{base}/children").read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        _add(out, "event loop thread" if int(tid) == pid else "other threads", values)
    for child in children:
        try:
            _add(out, "task processes", _read(f"/proc/{child}/stat", f"/proc/{child}/status"))
        except OSError:
            continue
    return out


def _add(out: Usage, part: str, values: list[float]) -> None:
    total = out.setdefault(part, [0.0, 0.0, 0.0])
    for i, v in enumerate(values):
        total[i] += v


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    n = args.jobs
    with embedded.tickwork_up(os.cpu_count() or 2) as srv:
        for r in range(args.rounds):
            before = usage(srv.pid)
            result = embedded.w1_enqueue(srv, n, f"w1e{r}-")
            after = usage(srv.pid)
            print(json.dumps({k: result[k] for k in ("jobs_per_s", "server_cpu_us_per_job")}))
            for part, (cpu, vol, inv) in after.items():
                was = before.get(part, [0.0, 0.0, 0.0])
                print(
                    f"  {part:<18} {(cpu - was[0]) / n * 1e6:6.0f} µs/job"
                    f"  switches/job: voluntary {(vol - was[1]) / n:.2f},"
                    f" involuntary {(inv - was[2]) / n:.2f}"
                )


if __name__ == "__main__":
    main()
