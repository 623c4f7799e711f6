"""The shell runner, on real subprocesses: output, exit status, env, cwd, timeout, cancel."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tests.fixtures.sinks import MemorySink, eventually
from tests.fixtures.task_runs import make_task_run
from tickwork.core.model import TaskKind
from tickwork.ports import RunResult
from tickwork.worker.runners.shell import ShellRunner


async def run(
    config: dict[str, Any],
    *,
    timeout: float | None = None,
    cancel: asyncio.Event | None = None,
    sink: MemorySink | None = None,
) -> tuple[RunResult, MemorySink]:
    sink = sink or MemorySink()
    task_run = make_task_run(TaskKind.SHELL, config, timeout=timeout, attempt=2)
    return await ShellRunner().run(task_run, sink, cancel or asyncio.Event()), sink


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie has already died)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def first_int(sink: MemorySink) -> int:
    return int(sink.text("stdout").split()[0])


async def test_shell_argv_success_captures_stdout_and_stderr() -> None:
    result, sink = await run({"argv": ["sh", "-c", "echo out; echo err >&2"]})
    assert result == RunResult(ok=True, exit_code=0)
    assert sink.text("stdout") == "out\n"
    assert sink.text("stderr") == "err\n"


async def test_shell_argv_is_not_interpreted_by_a_shell() -> None:
    result, sink = await run({"argv": ["echo", "$HOME", "a;b", "*"]})
    assert result.ok
    assert sink.text("stdout") == "$HOME a;b *\n"


async def test_shell_true_runs_command_under_sh() -> None:
    result, sink = await run({"shell": True, "command": "printf 'a\\nb\\n' | wc -l"})
    assert result.ok
    assert sink.text("stdout").strip() == "2"


async def test_shell_nonzero_exit_fails_with_exit_code() -> None:
    result, _ = await run({"argv": ["sh", "-c", "exit 3"]})
    assert result == RunResult(ok=False, error="exit code 3", exit_code=3)


async def test_shell_death_by_signal_names_the_signal() -> None:
    result, _ = await run({"argv": ["sh", "-c", "kill -KILL $$"]})
    assert result == RunResult(ok=False, error="killed by signal SIGKILL", exit_code=-9)


async def test_shell_env_adds_task_env_and_tickwork_variables() -> None:
    script = 'echo "$GREETING|$TICKWORK_JOB|$TICKWORK_RUN_ID|$TICKWORK_TASK_RUN_ID"; '
    script += 'echo "$TICKWORK_ATTEMPT|$TICKWORK_LOGICAL_DATE|${PATH:+has-path}"'
    result, sink = await run({"argv": ["sh", "-c", script], "env": {"GREETING": "hi"}})
    assert result.ok
    assert sink.text("stdout") == "hi|nightly|run-1|tr-1\n2|2026-03-29T01:30:00Z|has-path\n"


async def test_shell_cwd_is_honoured(tmp_path: Path) -> None:
    result, sink = await run({"argv": ["pwd"], "cwd": str(tmp_path)})
    assert result.ok
    assert sink.text("stdout") == f"{tmp_path}\n"


async def test_shell_missing_cwd_is_a_failed_attempt(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    result, _ = await run({"argv": ["pwd"], "cwd": str(missing)})
    assert not result.ok
    assert (
        result.error
        == f"cannot start 'pwd': working directory '{missing}': No such file or directory"
    )


async def test_shell_missing_executable_is_a_failed_attempt() -> None:
    result, _ = await run({"argv": ["tickwork-no-such-program", "x"]})
    assert result == RunResult(
        ok=False, error="cannot start 'tickwork-no-such-program': command not found"
    )


async def test_shell_non_executable_file_is_a_failed_attempt(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("echo hi\n")
    result, _ = await run({"argv": [str(script)]})
    assert result == RunResult(ok=False, error=f"cannot start '{script}': Permission denied")


async def test_shell_bad_config_names_the_field() -> None:
    result, _ = await run({"argv": "echo hi"})
    assert result.error == "config.argv: must be a non-empty list of strings"
    result, _ = await run({"shell": True})
    assert result.error == "config.command: must be a non-empty string with shell: true"
    result, _ = await run({"argv": ["true"], "env": {"N": 1}})
    assert result.error == "config.env: must be an object mapping names to string values"


async def test_shell_stdin_is_dev_null() -> None:
    result, sink = await run({"argv": ["cat"]}, timeout=5)
    assert result.ok
    assert sink.text() == ""


async def test_shell_invalid_utf8_is_replaced_and_split_characters_survive() -> None:
    # \xc3\xa9 is "é": written in two separate writes, it must still decode as one character.
    script = "printf 'bad \\377 '; printf '\\303'; sleep 0.05; printf '\\251\\n'"
    result, sink = await run({"shell": True, "command": script})
    assert result.ok
    assert sink.text("stdout") == "bad \ufffd \u00e9\n"


async def test_shell_long_output_without_newline_is_captured_whole() -> None:
    result, sink = await run({"shell": True, "command": "head -c 300000 /dev/zero | tr '\\0' a"})
    assert result.ok
    assert sink.text("stdout") == "a" * 300000
    assert len(sink.entries) > 1  # streamed in pieces, not held until the end


async def test_shell_output_is_streamed_while_the_process_runs() -> None:
    sink, cancel = MemorySink(), asyncio.Event()
    config = {"shell": True, "command": "echo first; sleep 30"}
    attempt = asyncio.ensure_future(run(config, cancel=cancel, sink=sink))
    await eventually(lambda: sink.text("stdout") == "first\n")
    assert not attempt.done()
    cancel.set()
    result, _ = await attempt
    assert result.cancelled


async def test_shell_timeout_kills_the_whole_process_group() -> None:
    # The grandchild prints its pid; the parent shell waits for it.
    config = {"shell": True, "command": "sleep 100 & echo $!; wait"}
    started = time.monotonic()
    result, sink = await run(config, timeout=0.3)
    assert result == RunResult(ok=False, error="timed out after 0.3 s", timed_out=True)
    assert time.monotonic() - started < 1.5
    grandchild = first_int(sink)
    await eventually(lambda: not pid_alive(grandchild), timeout=2)
    assert "timed_out: stopping process group" in sink.text("system")


async def test_shell_cancel_kills_a_process_that_ignores_sigterm_within_one_second() -> None:
    code = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(100)\n"
    )
    sink, cancel = MemorySink(), asyncio.Event()
    attempt = asyncio.ensure_future(
        run({"argv": [sys.executable, "-c", code]}, cancel=cancel, sink=sink)
    )
    await eventually(lambda: sink.text("stdout").endswith("\n"))
    pid = first_int(sink)
    cancel.set()
    started = time.monotonic()
    result, _ = await attempt
    assert time.monotonic() - started < 1.0
    assert result == RunResult(ok=False, error="cancelled", cancelled=True)
    await eventually(lambda: not pid_alive(pid), timeout=2)


async def test_shell_leftover_process_holding_the_pipes_is_killed_after_exit() -> None:
    # The shell exits at once; its background child keeps stdout open and must not keep the
    # attempt alive.
    started = time.monotonic()
    result, sink = await run({"shell": True, "command": "sleep 100 & echo $!"})
    assert result.ok
    assert time.monotonic() - started < 2.0
    leftover = first_int(sink)
    await eventually(lambda: not pid_alive(leftover), timeout=2)


async def test_shell_worker_cancellation_kills_the_process_group() -> None:
    sink = MemorySink()
    attempt = asyncio.ensure_future(
        run({"shell": True, "command": "sleep 100 & echo $!; wait"}, sink=sink)
    )
    await eventually(lambda: sink.text("stdout").endswith("\n"))
    attempt.cancel()
    await asyncio.wait({attempt})
    assert attempt.cancelled()
    grandchild = first_int(sink)
    await eventually(lambda: not pid_alive(grandchild), timeout=2)


async def test_shell_base_env_replaces_the_worker_environment() -> None:
    sink = MemorySink()
    task_run = make_task_run(TaskKind.SHELL, {"argv": ["/usr/bin/env"]})
    result = await ShellRunner(base_env={"ONLY": "this"}).run(task_run, sink, asyncio.Event())
    assert result.ok
    names = {line.split("=", 1)[0] for line in sink.text("stdout").splitlines()}
    assert names == {
        "ONLY",
        "TICKWORK_JOB",
        "TICKWORK_RUN_ID",
        "TICKWORK_TASK_RUN_ID",
        "TICKWORK_ATTEMPT",
        "TICKWORK_LOGICAL_DATE",
    }


async def test_shell_process_that_escaped_the_group_does_not_hold_the_attempt() -> None:
    started = time.monotonic()
    result, sink = await run({"shell": True, "command": "setsid sleep 100 & echo $!"})
    escaped = first_int(sink)
    try:
        assert result.ok
        assert time.monotonic() - started < 2.0
    finally:
        os.kill(escaped, signal.SIGKILL)
