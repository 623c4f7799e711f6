"""The one thing every peer's no-op task does: append its start time to a shared file.

Runs inside the peers' virtual environments (stdlib only). One ``os.write`` of a fixed-width
32-byte record to a file opened with O_APPEND, so records from all worker processes land whole,
the harness can count them from the file size alone, and the cost is the same for every peer
(a few microseconds). The timestamp is ``time.time_ns()`` taken first thing in the task body.
"""

from __future__ import annotations

import os
import time

RECORD_SIZE = 32  # "tg 00000042 1764400000123456789\n"
_fd: int | None = None
_pid: int | None = None


def record(tag: str, i: int) -> None:
    """Record that job ``i`` of workload ``tag`` (two characters) started now."""
    now = time.time_ns()
    global _fd, _pid
    if _pid != os.getpid():  # first call in this process (or a forked child)
        _fd = os.open(os.environ["PEERBENCH_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        _pid = os.getpid()
    assert _fd is not None
    os.write(_fd, b"%s %08d %019d\n" % (tag.encode(), i, now))
