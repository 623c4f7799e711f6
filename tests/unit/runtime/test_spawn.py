"""The spawner: processes started on its threads, their pipes and exit watched by the loop."""

from __future__ import annotations

import asyncio
import os
import uuid

from tests.fixtures.sinks import eventually
from tickwork.worker.spawn import Spawner
from tickwork.worker.tree import attempt_processes


def marked_env(marker: str) -> dict[str, str]:
    return {**os.environ, "TICKWORK_TASK_RUN_ID": marker, "TICKWORK_ATTEMPT": "1"}


async def test_spawn_reads_both_pipes_and_reports_exit_and_code() -> None:
    out: list[tuple[int, str]] = []
    child = await Spawner().spawn(
        ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"],
        env=os.environ,
        cwd=None,
        on_output=lambda fd, text: out.append((fd, text)),
    )
    try:
        await asyncio.wait_for(asyncio.gather(child.exited, child.drained), timeout=5)
    finally:
        child.close()
    assert child.returncode == 3
    assert sorted(out) == [(1, "out\n"), (2, "err\n")]


async def test_spawn_cancelled_while_starting_leaves_no_process_behind() -> None:
    marker = f"spawn-{uuid.uuid4().hex}"
    spawner = Spawner()
    spawning = asyncio.ensure_future(
        spawner.spawn(["sleep", "30"], env=marked_env(marker), cwd=None, on_output=print)
    )
    await asyncio.sleep(0)  # the start is on its way in a spawner thread
    spawning.cancel()
    await asyncio.wait({spawning})
    assert spawning.cancelled()
    # Whether it had started or not, nothing of it is left running.
    await eventually(lambda: not attempt_processes(marker, 1), timeout=5)


async def test_spawn_many_at_once_gives_each_its_own_process_and_exit() -> None:
    # Eight starts in flight at once on four threads: each one reaped, none mixed up.
    spawner = Spawner(threads=4)
    children = await asyncio.gather(
        *(spawner.spawn(["true"], env=os.environ, cwd=None, on_output=print) for _ in range(8))
    )
    try:
        await asyncio.wait_for(asyncio.gather(*(c.exited for c in children)), timeout=10)
    finally:
        for child in children:
            child.close()
    assert [c.returncode for c in children] == [0] * 8
    assert len({c.pid for c in children}) == 8
