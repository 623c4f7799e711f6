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
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from tickwork.core.errors import ValidationError
from tickwork.core.model import TaskRun
from tickwork.observe import tracing
from tickwork.ports import LogSink, RunResult
from tickwork.runtime.cancel import CancelSignal
from tickwork.runtime.targets import TargetError
from tickwork.taskcontext import TaskContext
from tickwork.worker import capture
from tickwork.worker.child import HEADER, encode_frame
from tickwork.worker.runners._wait import Ending, ended, wait_for_end
from tickwork.worker.runners.python import RESULT_LINE_MAX, PythonSpec, parse_python_spec
from tickwork.worker.tree import kill_attempt


class ChildDied(Exception):
    """The task process ended without replying (os._exit, a crash, the OOM killer)."""


class _Pipes(asyncio.SubprocessProtocol):
    """A task process's pipes, read by callbacks: each frame on its stdout goes straight to
    the attempt's log sink or resolves its reply. (Through ``asyncio.subprocess`` streams an
    attempt cost a task to read them, two ``readexactly`` awaits and a ``drain``: about a
    third of the worker's own cost per python task, bench/README.md "Python task isolation".)
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._buffer = bytearray()
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdout_open = True
        self.reply: asyncio.Future[dict[str, Any] | None] | None = None
        self.output: LogSink | None = None
        self.exited: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self._transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        buffer = self._buffer
        buffer += data if isinstance(data, bytes) else data.encode()
        start, size_of_head = 0, HEADER.size
        while len(buffer) - start >= size_of_head:
            (size,) = HEADER.unpack_from(buffer, start)
            end = start + size_of_head + size
            if len(buffer) < end:
                break
            self._deliver(json.loads(buffer[start + size_of_head : end]))
            start = end
        del buffer[:start]

    def _deliver(self, message: dict[str, Any]) -> None:
        if "o" in message:
            if self.output is not None:
                self.output.write(message["o"], message["d"])
        elif self.reply is not None and not self.reply.done():
            self.reply.set_result(message)

    @property
    def stdout_open(self) -> bool:
        return self._stdout_open

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._stdout_open = False
            if self.reply is not None and not self.reply.done():
                self.reply.set_result(None)  # no reply will come: the attempt asks why
            self._close_when_done()

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
        self._close_when_done()

    def _close_when_done(self) -> None:
        if self.exited.done() and not self._stdout_open and self._transport is not None:
            self._transport.close()


class _Child:
    """One task process: its pipes, and the attempt it runs."""

    def __init__(self, transport: asyncio.SubprocessTransport, pipes: _Pipes) -> None:
        self._transport = transport
        self._pipes = pipes
        stdin = transport.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        self._stdin = stdin
        self.pid: int = transport.get_pid()

    @classmethod
    async def start(cls) -> _Child:
        env = {**os.environ, "TICKWORK_WORKER_PID": str(os.getpid())}
        loop = asyncio.get_running_loop()
        transport, pipes = await loop.subprocess_exec(
            lambda: _Pipes(loop),
            sys.executable,
            "-m",
            "tickwork.worker.child",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            start_new_session=True,  # its own process group: killed with all it started
            env=env,
        )
        child = cls(transport, pipes)
        child._stdin.write(encode_frame({"path": sys.path}))
        return child

    @property
    def alive(self) -> bool:
        return self._transport.get_returncode() is None and self._pipes.stdout_open

    def send(
        self, request: Mapping[str, Any], output: LogSink
    ) -> asyncio.Future[dict[str, Any] | None]:
        """Send one attempt; its output goes to ``output`` until the reply resolves the
        future (None: the process died first, see :meth:`died`)."""
        reply: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        self._pipes.reply, self._pipes.output = reply, output
        if self._pipes.stdout_open:
            self._stdin.write(encode_frame(request))
        else:
            reply.set_result(None)
        return reply

    async def died(self) -> ChildDied:
        """Why the process ended without replying, once it has."""
        await self._pipes.exited
        code = self._transport.get_returncode() or 0
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return ChildDied(f"the task's process died ({how})")

    async def kill(self, grace: float) -> None:
        """SIGTERM the process group, SIGKILL what is left after ``grace`` s."""
        self._signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._pipes.exited), grace)
        self._signal(signal.SIGKILL)  # its subprocesses too, even if it exited
        await self._pipes.exited

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

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
        self._last_spec: tuple[Mapping[str, Any], PythonSpec] | None = None

    def pids(self) -> list[int]:
        """The task processes alive now (for measurements)."""
        return [c.pid for c in (*self._idle, *self._busy) if c.alive]

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
            spec = self._spec_of(task_run.config)
        except ValidationError as exc:
            return RunResult(ok=False, error=str(exc))
        if cancel.is_set():
            return ended(Ending.CANCELLED, task_run.timeout)
        if self._free is None:
            self._free = asyncio.Semaphore(self._max)
        request: dict[str, Any] = {
            "target": spec.target,
            "kwargs": dict(spec.kwargs),
            "ctx": context_of(task_run, spec.kwargs).to_json(),  # the child sets its env too
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
        child = self._idle_child() or await _Child.start()
        self._busy.add(child)
        reply = child.send(request, output)
        try:
            ending = await _reply_or_end(reply, timeout, cancel)
        except BaseException:  # our own cancellation: the attempt must not outlive it
            self._busy.discard(child)
            await asyncio.shield(child.kill(self._cancel_grace))
            kill_attempt(task_run.id, task_run.attempt)
            raise
        self._busy.discard(child)
        if ending is not Ending.DONE:
            await child.kill(self._cancel_grace)
            kill_attempt(task_run.id, task_run.attempt)  # what left the group (setsid)
            output.write("system", f"{ending.value}: the task's process was stopped\n")
            return ended(ending, timeout)
        message = reply.result()
        if message is None:
            return RunResult(ok=False, error=str(await child.died()))
        self._keep(child)
        return _result(message, output)

    def _spec_of(self, config: Mapping[str, Any]) -> PythonSpec:
        """``parse_python_spec``, once per config object: the task runs of one claim share
        theirs (the store decodes each distinct stored value once), and nothing changes a
        task run's config in place. The last one is kept, so its identity is never reused."""
        last = self._last_spec
        if last is not None and last[0] is config:
            return last[1]
        spec = parse_python_spec(config)
        self._last_spec = (config, spec)
        return spec

    def _idle_child(self) -> _Child | None:
        """A warm process; one that died while idle (killed from outside) is let go."""
        while self._idle:
            child = self._idle.pop()
            if child.alive:
                return child
            child.close()
        return None

    def _keep(self, child: _Child) -> None:
        if child.alive:
            self._idle.append(child)
        else:
            child.close()


async def _reply_or_end(
    reply: asyncio.Future[dict[str, Any] | None], timeout: float | None, cancel: asyncio.Event
) -> Ending:
    """``wait_for_end`` for a reply future this runner owns: the timeout or a cancel resolves
    the reply itself (with None, as a death does; a late reply is then dropped), so the
    attempt wakes in one step of the loop instead of two (``wait_for_end``'s own future and
    its callback, per attempt)."""
    if not isinstance(cancel, CancelSignal):
        return await wait_for_end(reply, timeout, cancel)
    if cancel.is_set():
        return Ending.CANCELLED
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not reply.done():
            stopped = True
            reply.set_result(None)

    cancel.on_set(stop)
    timer = None if timeout is None else asyncio.get_running_loop().call_later(timeout, stop)
    try:
        await reply
    finally:
        cancel.discard(stop)
        if timer is not None:
            timer.cancel()
    if not stopped:
        return Ending.DONE
    return Ending.CANCELLED if cancel.is_set() else Ending.TIMED_OUT


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
