"""Finding the processes of one attempt that left its process group.

Every process of an attempt inherits ``TICKWORK_TASK_RUN_ID`` and ``TICKWORK_ATTEMPT`` from the
task (shell tasks get them from the runner, python task processes set them per attempt). A
process that left the group (``setsid``, a double fork re-parented to init) is still found
by them in ``/proc/PID/environ`` (the environment it was started with), and killed with the
group on timeout, cancel and abandon.
"""

from __future__ import annotations

import contextlib
import os
import signal


def attempt_marker(task_run_id: str, attempt: int) -> tuple[bytes, bytes]:
    return (f"TICKWORK_TASK_RUN_ID={task_run_id}".encode(), f"TICKWORK_ATTEMPT={attempt}".encode())


def attempt_processes(task_run_id: str, attempt: int) -> list[int]:
    """Pids of the live processes started with this attempt's variables (ours to read)."""
    run_var, attempt_var = attempt_marker(task_run_id, attempt)
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        if run_var in variables and attempt_var in variables:
            found.append(int(entry))
    return found


def kill_attempt(task_run_id: str, attempt: int) -> int:
    """SIGKILL every process of the attempt, wherever it went; how many were found."""
    pids = attempt_processes(task_run_id, attempt)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)
