"""The python runner: ``module.path:function`` called in a task process that can be stopped.

A pool of child processes (``tickwork.worker.child``), each running one task at a time, is
kept warm: a process is reused while its attempts end normally, so imports are paid once. On
timeout or cancel the attempt's process group gets SIGTERM (the task's ``finally`` blocks run,
as ``Interrupted``), then SIGKILL after ``cancel_grace``; a fresh process replaces it when
needed. So user code, sync or ``async def``, blocking or not, can never stall the worker's
event loop (its heartbeats, its API in `tickwork up`), and timeout and cancel really stop it.
Processes are started with ``start_new_session``, die with the worker (parent-death signal),
and take their own subprocesses with them when killed (the process group).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from tickwork.core.errors import ValidationError
from tickwork.core.model import TaskRun
from tickwork.observe import tracing
from tickwork.ports import LogSink, RunResult
from tickwork.runtime.targets import TargetError
from tickwork.taskcontext import TaskContext
from tickwork.worker import capture
from tickwork.worker.child import HEADER, encode_frame
from tickwork.worker.runners._wait import Ending, ended, wait_for_end
from tickwork.worker.runners.python import RESULT_LINE_MAX, parse_python_spec
from tickwork.worker.runners.shell import tickwork_env
from tickwork.worker.tree import kill_attempt


class ChildDied(Exception):
    """The task process ended without replying (os._exit, a crash, the OOM killer)."""


class _Child:
    """One task process and its two pipes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._stdout = proc.stdout

    @classmethod
    async def start(cls) -> _Child:
        env = {**os.environ, "TICKWORK_WORKER_PID": str(os.getpid())}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tickwork.worker.child",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: killed with all it started
            env=env,
            limit=1 << 20,
        )
        child = cls(proc)
        child._stdin.write(encode_frame({"path": sys.path}))
        return child

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def call(self, request: Mapping[str, Any], output: LogSink) -> dict[str, Any]:
        """Send one attempt and pass its output on until the reply comes."""
        self._stdin.write(encode_frame(request))
        try:
            await self._stdin.drain()
            while True:
                head = await self._stdout.readexactly(HEADER.size)
                (size,) = HEADER.unpack(head)
                message = json.loads(await self._stdout.readexactly(size))
                if "o" not in message:
                    return dict(message)
                output.write(message["o"], message["d"])
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            code = await self.proc.wait()
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            raise ChildDied(f"the task's process died ({how})") from exc

    async def kill(self, grace: float) -> None:
        """SIGTERM the process group, SIGKILL what is left after ``grace`` s."""
        self._signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), grace)
        self._signal(signal.SIGKILL)  # its subprocesses too, even if it exited
        await self.proc.wait()

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def close(self) -> None:
        """Let an idle process end: its stdin closes, its loop ends."""
        self._stdin.close()


def context_of(task_run: TaskRun, kwargs: Mapping[str, Any]) -> TaskContext:
    return TaskContext(
        job=task_run.job_name,
        task=task_run.task_name,
        run_id=task_run.run_id,
        task_run_id=task_run.id,
        attempt=task_run.attempt,
        logical_date=task_run.logical_date,
        queue=task_run.queue,
        params=kwargs,
    )


class ProcessPythonRunner:
    """Runs ``python`` tasks in task processes; see the module docstring.

    At most ``max_processes`` attempts run at once (more wait for a process), and as many
    processes are kept warm once started. Call :meth:`aclose` when done.
    """

    def __init__(self, *, max_processes: int = 32, cancel_grace: float = 0.5) -> None:
        self._max = max_processes
        self._cancel_grace = cancel_grace
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._free: asyncio.Semaphore | None = None

    def pids(self) -> list[int]:
        """The task processes alive now (for measurements)."""
        return [c.proc.pid for c in (*self._idle, *self._busy) if c.alive]

    async def aclose(self) -> None:
        """Stop every task process (running attempts were cancelled by the pool first)."""
        for child in self._idle:
            child.close()
        everyone = [*self._idle, *self._busy]
        self._idle.clear()
        await asyncio.gather(*(c.kill(self._cancel_grace) for c in everyone))

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        """Execute one attempt; see the class docstring and ``tickwork.ports.Runner``."""
        try:
            spec = parse_python_spec(task_run.config)
        except ValidationError as exc:
            return RunResult(ok=False, error=str(exc))
        if cancel.is_set():
            return ended(Ending.CANCELLED, task_run.timeout)
        if self._free is None:
            self._free = asyncio.Semaphore(self._max)
        request: dict[str, Any] = {
            "target": spec.target,
            "kwargs": dict(spec.kwargs),
            "ctx": context_of(task_run, spec.kwargs).to_json(),
            "env": tickwork_env(task_run),
        }
        if tracing.enabled():  # the task process makes the attempt's span its current one
            request["traceparent"] = tracing.traceparent()
        output = capture.LineBufferedSink(log)
        try:
            async with self._free:
                return await self._attempt(request, output, task_run, cancel)
        finally:
            output.close()

    async def _attempt(
        self,
        request: Mapping[str, Any],
        output: capture.LineBufferedSink,
        task_run: TaskRun,
        cancel: asyncio.Event,
    ) -> RunResult:
        timeout = task_run.timeout
        child = self._idle.pop() if self._idle else await _Child.start()
        self._busy.add(child)
        work = asyncio.ensure_future(child.call(request, output))
        try:
            ending = await wait_for_end(work, timeout, cancel)
        except BaseException:  # our own cancellation: the attempt must not outlive it
            work.cancel()
            self._busy.discard(child)
            await asyncio.shield(child.kill(self._cancel_grace))
            kill_attempt(task_run.id, task_run.attempt)
            raise
        if ending is not Ending.DONE:
            work.cancel()
            self._busy.discard(child)
            await child.kill(self._cancel_grace)
            kill_attempt(task_run.id, task_run.attempt)  # what left the group (setsid)
            output.write("system", f"{ending.value}: the task's process was stopped\n")
            return ended(ending, timeout)
        self._busy.discard(child)
        try:
            reply = work.result()
        except ChildDied as exc:
            return RunResult(ok=False, error=str(exc))
        self._keep(child)
        return _result(reply, output)

    def _keep(self, child: _Child) -> None:
        if child.alive:
            self._idle.append(child)
        else:
            child.close()


def _result(reply: Mapping[str, Any], output: LogSink) -> RunResult:
    if not reply.get("ok"):
        return RunResult(ok=False, error=str(reply.get("error") or "failed"))
    if "nonjson" in reply:
        output.write("system", f"result is not JSON-serializable: {reply['nonjson']}\n")
        return RunResult(ok=True, result=_NotJson())
    text = reply.get("result")
    if text is None:
        return RunResult(ok=True)
    shown = text
    if len(text) > RESULT_LINE_MAX:
        shown = f"{text[:RESULT_LINE_MAX]}… ({len(text)} characters in all)"
    output.write("system", f"result: {shown}\n")
    return RunResult(ok=True, result=json.loads(text))


class _NotJson:
    """Stands for a result that was not JSON: the pool logs nothing more and passes none on."""


__all__ = ["ChildDied", "ProcessPythonRunner", "TargetError"]
