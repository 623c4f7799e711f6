"""What a workload cost each process kind, from ``/proc`` and Redis's own counters (stdlib only).

A :class:`Snapshot` is taken before and after a workload; :func:`per_job` divides the difference
by the number of jobs: CPU µs (user + system) and wake-ups (voluntary + involuntary context
switches of every thread) per job of each role, Redis's own CPU and commands per job. A role's
processes include their descendants (Celery's pool children, tickwork's python task
processes), counted while they are alive: a child that exits between the two snapshots is
missed, so measure with long-lived children (both peers' are).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(now := todo.pop())
        todo.extend(children.get(now, []))
    return tree


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def proc_wakeups(pid: int) -> int:
    """Context switches (voluntary + involuntary) of every thread of ``pid`` so far."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            lines = (task / "status").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(ln.split()[1]) for ln in lines if "ctxt_switches" in ln)
    return total


def redis_info(port: int, section: str) -> dict[str, str]:
    """``INFO section`` of the Redis on ``port`` as a dict."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n" % (len(section), section.encode()))
        data = b""
        while b"\r\n" not in data:
            data += s.recv(65536)
        head, body = data.split(b"\r\n", 1)
        size = int(head[1:])
        while len(body) < size:
            body += s.recv(65536)
    pairs = (ln.split(":", 1) for ln in body[:size].decode().splitlines() if ":" in ln)
    return {k: v for k, v in pairs}


@dataclass
class Snapshot:
    """Counters at one instant: per role, CPU seconds and wake-ups; Redis CPU and commands."""

    cpu: dict[str, float] = field(default_factory=dict)
    wakeups: dict[str, int] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)  # e.g. pg transactions

    @classmethod
    def take(
        cls, roles: dict[str, list[int]], redis_port: int | None, extra: dict[str, float]
    ) -> Snapshot:
        """``roles`` maps a role to its root pids (their descendants are included)."""
        snap = cls(extra=dict(extra))
        for role, roots in roles.items():
            pids = [p for root in roots for p in descendants(root)]
            snap.cpu[role] = sum(proc_cpu(p) for p in pids)
            snap.wakeups[role] = sum(proc_wakeups(p) for p in pids)
        if redis_port is not None:
            cpu = redis_info(redis_port, "cpu")
            stats = redis_info(redis_port, "stats")
            snap.cpu["redis"] = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
            snap.extra["redis_commands"] = float(stats["total_commands_processed"])
        return snap


def per_job(before: Snapshot, after: Snapshot, n: int) -> dict[str, dict[str, float]]:
    """CPU µs and wake-ups per job of each role (and in total), other counters per job."""
    cpu = {r: round((s - before.cpu.get(r, 0.0)) * 1e6 / n, 1) for r, s in after.cpu.items()}
    cpu["total"] = round(sum(cpu.values()), 1)
    wake = {r: round((w - before.wakeups.get(r, 0)) / n, 2) for r, w in after.wakeups.items()}
    wake["total"] = round(sum(wake.values()), 2)
    other = {k: round((v - before.extra.get(k, 0.0)) / n, 2) for k, v in after.extra.items()}
    return {"cpu_us": cpu, "wakeups": wake, "counters": other}


def scaled(cost: dict[str, dict[str, float]], factor: float) -> dict[str, dict[str, float]]:
    """``cost`` (as from :func:`per_job`) times ``factor``, e.g. per job -> per second."""
    return {
        group: {k: round(v * factor, 2) for k, v in values.items()}
        for group, values in cost.items()
        if isinstance(values, dict)
    }
