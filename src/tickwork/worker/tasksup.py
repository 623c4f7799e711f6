"""The supervisor of one shell task attempt: ``python -I -S tasksup.py COMMAND [ARG...]``.

Run by the shell runner as the leader of the attempt's session, with the command as its
child, so that the whole process tree of the attempt dies with the attempt:

- it dies with its worker: the parent-death signal (Linux ``PR_SET_PDEATHSIG``) tells it when
  the worker is gone, even by ``kill -9``, and it then kills everything the attempt started,
  so a task can no longer run on and overlap its own retry;
- it is a child subreaper (``PR_SET_CHILD_SUBREAPER``): what the command starts and abandons
  (a double fork, a ``setsid`` daemon) is re-parented to it instead of to init, so it stays
  in the tree it kills;
- it leaves the exit status of the command as its own (the same code, or the same signal).

SIGTERM from the worker (timeout, cancel) is passed on to every process of the tree, the
worker's SIGKILL to the group after the grace reaches what is left of the group, and the
worker also kills, by their ``TICKWORK_TASK_RUN_ID`` / ``TICKWORK_ATTEMPT`` environment, the
processes that left the group. Standard library only and run with ``-S``: it must start in a
few milliseconds, as every shell start pays it. So it imports no more than it needs: ``_signal``
(``signal`` builds its enums at import), no ``contextlib``; that took its start from 24 to
17 ms of CPU a start here (bench/README.md, "Shell starts").
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # not typing's: importing typing costs a start more than it saves
if TYPE_CHECKING:
    import signal
else:  # the C module under signal.py: ints, not enums (7 ms of CPU less per start, measured)
    import _signal as signal

DROP = "TICKWORK_SUPERVISOR_DROP"  # names of variables meant for us, not for the command
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (by parent pid), found in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def signal_tree(sig: int) -> None:
    for pid in descendants(os.getpid()):
        try:  # noqa: SIM105 (contextlib costs 6 ms of CPU per start to import)
            os.kill(pid, sig)
        except OSError:
            pass


def worker_died(signum: int, frame: object) -> None:
    # Kill until nothing is left (a process may fork while we look), then die ourselves.
    for _ in range(20):
        if not descendants(os.getpid()):
            break
        signal_tree(signal.SIGKILL)
        time.sleep(0.01)
    os._exit(128 + signal.SIGKILL)


def _terminate(signum: int, frame: object) -> None:
    signal_tree(signal.SIGTERM)  # the group has it from the worker; the escapees get it too


def prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes  # only where there is a prctl to call

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    worker = os.getppid()
    signal.signal(signal.SIGUSR2, worker_died)
    signal.signal(signal.SIGTERM, _terminate)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGUSR2)
    if os.getppid() != worker:  # the worker died before the parent-death signal was set
        os._exit(128 + signal.SIGKILL)
    try:
        command = os.fork()
        if command == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGUSR2, signal.SIG_DFL)
            for name in [DROP, *os.environ.get(DROP, "").split(",")]:
                os.environ.pop(name, None)
            try:
                os.execvp(argv[0], argv)
            except OSError as exc:
                os.write(2, f"cannot start {argv[0]!r}: {exc.strerror}\n".encode())
                os._exit(127)
        status = _reap_until(command)
    except KeyboardInterrupt:
        os._exit(130)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be handled anyway
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 1)


def _reap_until(command: int) -> int:
    """Wait for the command; reap adopted orphans meanwhile (we are their subreaper)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if pid == command:
            return status


if __name__ == "__main__":
    main(sys.argv[1:])
