"""A task's whole process tree dies with its attempt: on cancel (even what left the group
with setsid) and when its worker is killed with SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.fixtures.sinks import MemorySink
from tests.fixtures.sinks import eventually as until
from tests.fixtures.task_runs import make_task_run
from tickwork.core.model import TaskKind
from tickwork.worker.runners.python_process import ProcessPythonRunner
from tickwork.worker.runners.shell import ShellRunner


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def escaping_script(pidfile: Path) -> str:
    # A daemon in a session of its own, then the task itself waits.
    return f"setsid sleep 61 & echo $! > {pidfile}; sleep 62"


async def wait_for_pid(pidfile: Path) -> int:
    # Starting a worker interpreter and its task takes seconds on a busy machine.
    await until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", timeout=30)
    return int(pidfile.read_text())


async def test_cancel_kills_what_a_shell_task_started_with_setsid(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon"
    task_run = make_task_run(TaskKind.SHELL, {"argv": ["sh", "-c", escaping_script(pidfile)]})
    cancel = asyncio.Event()
    attempt = asyncio.create_task(ShellRunner().run(task_run, MemorySink(), cancel))
    daemon = await wait_for_pid(pidfile)
    cancel.set()
    result = await attempt
    assert result.cancelled
    await until(lambda: not alive(daemon))


async def test_cancel_kills_what_a_python_task_started_with_setsid(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon"
    config = {
        "target": "tests.fixtures.process_tasks:spawns",
        "kwargs": {"pidfile": str(pidfile), "new_session": True},
    }
    runner = ProcessPythonRunner()
    cancel = asyncio.Event()
    try:
        attempt = asyncio.create_task(
            runner.run(make_task_run(TaskKind.PYTHON, config), MemorySink(), cancel)
        )
        daemon = await wait_for_pid(pidfile)
        cancel.set()
        assert (await attempt).cancelled
        await until(lambda: not alive(daemon))
    finally:
        await runner.aclose()


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from tests.fixtures.sinks import MemorySink
    from tests.fixtures.task_runs import make_task_run
    from tickwork.core.model import TaskKind
    from tickwork.worker.runners.shell import ShellRunner

    script = sys.argv[1]
    task_run = make_task_run(TaskKind.SHELL, {"argv": ["sh", "-c", script]})
    asyncio.run(ShellRunner().run(task_run, MemorySink(), asyncio.Event()))
    """
)


async def test_a_shell_task_dies_with_its_worker_killed_by_sigkill(tmp_path: Path) -> None:
    daemon_file, task_file = tmp_path / "daemon", tmp_path / "task"
    script = f"setsid sleep 61 & echo $! > {daemon_file}; echo $$ > {task_file}; sleep 62"
    worker = subprocess.Popen([sys.executable, "-c", WORKER, script], cwd=Path.cwd())  # noqa: ASYNC220
    try:
        daemon, task = await wait_for_pid(daemon_file), await wait_for_pid(task_file)
        assert alive(daemon) and alive(task)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        started = time.monotonic()
        await until(lambda: not alive(task) and not alive(daemon))
        assert time.monotonic() - started < 5
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
