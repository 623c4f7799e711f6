"""Reading the start records the peers' no-op tasks append (see peerside/peer_record.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

RECORD_SIZE = 32  # must match peerside/peer_record.py: b"tg 00000042 1764400000123456789\n"


class Records:
    """A record file shared by all worker processes of one contender; counted by its size."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def count(self) -> int:
        return self.path.stat().st_size // RECORD_SIZE

    def wait(
        self,
        mark: int,
        n: int,
        *,
        timeout: float,
        stall: float,
        check: Callable[[], None] = lambda: None,
    ) -> int:
        """Wait until ``n`` records arrived after ``mark``, for at most ``timeout`` s, or until
        none arrived for ``stall`` s; ``check`` raises if a worker died. Returns the count."""
        deadline = time.monotonic() + timeout
        seen, last_progress = -1, time.monotonic()
        while True:
            got = self.count() - mark
            now = time.monotonic()
            if got != seen:
                seen, last_progress = got, now
            if got >= n or now > deadline or now - last_progress > stall:
                return got
            check()
            time.sleep(0.01)

    def read(self, mark: int) -> list[tuple[str, int, int]]:
        """(tag, job id, start ns) of every record after ``mark``."""
        with self.path.open("rb") as f:
            f.seek(mark * RECORD_SIZE)
            data = f.read()
        out = []
        for k in range(0, len(data) - RECORD_SIZE + 1, RECORD_SIZE):
            tag, job, ns = data[k : k + RECORD_SIZE].split()
            out.append((tag.decode(), int(job), int(ns)))
        return out


def first_starts(rows: list[tuple[str, int, int]], tag: str) -> tuple[dict[int, int], int]:
    """Earliest start per job id of workload ``tag``, and how many records were duplicates."""
    starts: dict[int, int] = {}
    duplicates = 0
    for t, job, ns in rows:
        if t != tag:
            continue
        if job in starts:
            duplicates += 1
            starts[job] = min(starts[job], ns)
        else:
            starts[job] = ns
    return starts, duplicates
