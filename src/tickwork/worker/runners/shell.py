"""The shell runner: one subprocess per attempt, in its own process group."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from tickwork.core.errors import ValidationError
from tickwork.core.model import TaskRun
from tickwork.ports import LogSink, RunResult
from tickwork.taskcontext import task_env
from tickwork.worker import tasksup
from tickwork.worker.runners._wait import Ending, ended, wait_for_end
from tickwork.worker.spawn import Child, Spawner
from tickwork.worker.tree import kill_attempt

# Each attempt runs under its own supervisor (worker/tasksup.py), started without site
# packages so that it costs milliseconds: its tree dies with it, and it dies with us.
SUPERVISOR = (sys.executable, "-S", "-s", tasksup.__file__, "--")

_STREAMS = {1: "stdout", 2: "stderr"}


@dataclass(frozen=True, slots=True)
class ShellSpec:
    """A shell task's config, checked: the argv to exec, extra env, working directory."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None


def parse_shell_spec(config: Mapping[str, Any]) -> ShellSpec:
    """Check a shell task's config; raise ``ValidationError`` naming the field at fault."""
    if config.get("shell", False):
        command = config.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValidationError("config.command", "must be a non-empty string with shell: true")
        argv: tuple[str, ...] = ("/bin/sh", "-c", command)
    else:
        raw = config.get("argv")
        if not isinstance(raw, list | tuple) or not raw or not all(isinstance(a, str) for a in raw):
            raise ValidationError("config.argv", "must be a non-empty list of strings")
        argv = tuple(raw)
    return ShellSpec(argv=argv, env=_parse_env(config.get("env")), cwd=_parse_cwd(config))


def _parse_env(env: object) -> Mapping[str, str]:
    if env is None:
        return {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ValidationError("config.env", "must be an object mapping names to string values")
    return env


def _parse_cwd(config: Mapping[str, Any]) -> str | None:
    cwd = config.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise ValidationError("config.cwd", "must be a directory path (a non-empty string)")
    return cwd


def tickwork_env(task_run: TaskRun) -> dict[str, str]:
    """The variables that tell a task which job, run and attempt it is executing."""
    tr = task_run
    return task_env(tr.job_name, tr.run_id, tr.id, tr.attempt, tr.logical_date)


class ShellRunner:
    """Runs ``shell`` tasks: ``argv`` exec'd directly, or ``command`` under ``/bin/sh -c``.

    Each attempt gets its own session and process group, so a timeout or a cancel reaches
    everything the command started: SIGTERM to the group, then SIGKILL after ``kill_grace``
    seconds. When the main process exits by itself, anything it left behind in its group
    that still holds its stdout/stderr is killed after ``drain_grace`` seconds so the attempt
    can finish; background processes that closed those pipes are left alone. Output is
    streamed to the sink while the process runs, decoded as UTF-8 with invalid bytes
    replaced. Stdin is ``/dev/null``. The environment is ``base_env`` (default: the worker's
    own, read at each spawn), then the task's ``env``, then the ``TICKWORK_*`` variables.
    """

    def __init__(
        self,
        *,
        base_env: Mapping[str, str] | None = None,
        kill_grace: float = 0.5,
        drain_grace: float = 0.5,
        spawner: Spawner | None = None,
    ) -> None:
        self._base_env = base_env
        self._spawner = spawner or Spawner()
        self._kill_grace = kill_grace
        self._drain_grace = drain_grace

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        """Execute one attempt; see the class docstring and ``tickwork.ports.Runner``."""
        try:
            spec = parse_shell_spec(task_run.config)
        except ValidationError as exc:
            return RunResult(ok=False, error=str(exc))
        if cancel.is_set():
            return ended(Ending.CANCELLED, task_run.timeout)
        base = os.environ if self._base_env is None else self._base_env
        env = {**base, **spec.env, **tickwork_env(task_run)}
        if "PYTHONCOERCECLOCALE" not in env:
            # The supervisor is python: keep it from adding LC_CTYPE to the command's env
            # (PEP 538); it drops the variables it was told to before exec'ing the command.
            env |= {"PYTHONCOERCECLOCALE": "0", tasksup.DROP: "PYTHONCOERCECLOCALE"}
        try:
            _check_startable(spec, env)
            child = await self._spawn(spec, env, log)
        except OSError as exc:
            return RunResult(ok=False, error=_spawn_error(exc, spec))
        try:
            return await self._supervise(child, task_run, cancel, log)
        except BaseException:
            # The worker itself is being cancelled: leave no process behind, and wait (briefly)
            # until it is reaped so the loop is not closed under a running child.
            _signal_group(child.pid, signal.SIGKILL)
            kill_attempt(task_run.id, task_run.attempt)
            await asyncio.wait({child.exited}, timeout=self._kill_grace)
            raise
        finally:
            child.close()

    async def _spawn(self, spec: ShellSpec, env: Mapping[str, str], log: LogSink) -> Child:
        def output(fd: int, text: str) -> None:
            log.write(_STREAMS[fd], text)

        return await self._spawner.spawn(
            (*SUPERVISOR, *spec.argv), env=env, cwd=spec.cwd, on_output=output
        )

    async def _supervise(
        self, child: Child, task_run: TaskRun, cancel: asyncio.Event, log: LogSink
    ) -> RunResult:
        pgid = child.pid  # a new session: the group id is the leader's pid
        timeout = task_run.timeout
        ending = await wait_for_end(child.exited, timeout, cancel)
        if ending is not Ending.DONE:
            log.write("system", f"{ending.value}: stopping process group {pgid}\n")
            await self._stop(pgid, child.exited)
            # What left the group (setsid) is found by its TICKWORK_* variables.
            if escaped := kill_attempt(task_run.id, task_run.attempt):
                log.write("system", f"killed {escaped} process(es) outside the group\n")
        await self._drain(pgid, child.drained)
        if ending is not Ending.DONE:
            return ended(ending, timeout)
        returncode = child.returncode
        assert returncode is not None
        return _exit_result(returncode)

    async def _stop(self, pgid: int, exited: asyncio.Future[None]) -> None:
        _signal_group(pgid, signal.SIGTERM)
        await asyncio.wait({exited}, timeout=self._kill_grace)
        # Also reaches members that ignored SIGTERM after the leader obeyed it.
        _signal_group(pgid, signal.SIGKILL)
        await exited

    async def _drain(self, pgid: int, drained: asyncio.Future[None]) -> None:
        await asyncio.wait({drained}, timeout=self._drain_grace)
        if drained.done():
            return
        # A leftover process holds the pipes open; it would keep the attempt alive forever.
        _signal_group(pgid, signal.SIGKILL)
        # If it escaped the group (setsid) it keeps the pipes: closing the transport stops
        # our reading.
        await asyncio.wait({drained}, timeout=self._drain_grace)


def _check_startable(spec: ShellSpec, env: Mapping[str, str]) -> None:
    """Raise the OSError that exec'ing the command would, before the supervisor is started
    (which would only report it as exit code 127)."""
    if spec.cwd is not None and not os.path.isdir(spec.cwd):
        raise FileNotFoundError(2, "No such file or directory", spec.cwd)
    program = spec.argv[0]
    if "/" in program:
        where = program if spec.cwd is None else os.path.join(spec.cwd, program)
        if not os.path.exists(where):
            raise FileNotFoundError(2, "No such file or directory", program)
        if not os.access(where, os.X_OK) or os.path.isdir(where):
            raise PermissionError(13, "Permission denied", program)
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(2, "No such file or directory", program)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(pgid, sig)


def _exit_result(returncode: int) -> RunResult:
    if returncode == 0:
        return RunResult(ok=True, exit_code=0)
    if returncode < 0:
        name = _signal_name(-returncode)
        return RunResult(ok=False, error=f"killed by signal {name}", exit_code=returncode)
    return RunResult(ok=False, error=f"exit code {returncode}", exit_code=returncode)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _spawn_error(exc: OSError, spec: ShellSpec) -> str:
    if spec.cwd is not None and exc.filename == spec.cwd:
        return f"cannot start {spec.argv[0]!r}: working directory {spec.cwd!r}: {exc.strerror}"
    if isinstance(exc, FileNotFoundError):
        return f"cannot start {spec.argv[0]!r}: command not found"
    return f"cannot start {spec.argv[0]!r}: {exc.strerror or exc}"
