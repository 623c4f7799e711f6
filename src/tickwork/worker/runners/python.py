"""The python runner: call ``module.path:function`` inside the worker process."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import re
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from tickwork.core.errors import ValidationError
from tickwork.core.model import TaskRun
from tickwork.ports import LogSink, RunResult
from tickwork.runtime.targets import TargetError, resolve_target
from tickwork.worker import capture
from tickwork.worker.runners._wait import Ending, ended, wait_for_end

_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
# Frames of these modules sit between the task and us; users need not read them.
_PLUMBING = ("asyncio", "concurrent.futures", "contextvars", "tickwork.worker")
RESULT_LINE_MAX = 1000  # characters of a result's JSON shown in the log


@dataclass(frozen=True, slots=True)
class PythonSpec:
    """A python task's config, checked."""

    target: str
    kwargs: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _Target:
    function: Callable[..., Any]
    is_async: bool


def parse_python_spec(config: Mapping[str, Any]) -> PythonSpec:
    """Check a python task's config; raise ``ValidationError`` naming the field at fault."""
    target = config.get("target")
    if not isinstance(target, str) or not _TARGET.match(target):
        raise ValidationError("config.target", "must look like 'module.path:function'")
    kwargs = config.get("kwargs")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise ValidationError("config.kwargs", "must be a JSON object of keyword arguments")
    return PythonSpec(target=target, kwargs=kwargs)


class PythonRunner:
    """Runs ``python`` tasks: ``target`` called with ``kwargs`` in the worker process.

    Async functions are awaited in the worker's loop; sync functions run in the runner's
    own pool of up to ``max_threads`` threads so they do not block it (not the loop's default
    pool, which DNS lookups need: sync tasks stuck in it would stall every http task).
    Imported targets are cached. With ``capture_output``, ``print()`` and ``sys.stdout`` /
    ``sys.stderr`` writes of the task go to its sink: each attempt makes sure the capture
    proxies are installed (a cheap check, and it survives code such as pytest that swaps
    ``sys.stdout`` behind our back).

    On timeout or cancel an async function is cancelled (it gets ``cancel_grace`` seconds to
    clean up). A sync function cannot be stopped: Python has no way to kill a thread. The
    attempt ends at once as timed out or cancelled, and the thread keeps running in the
    background until the function returns (holding one of the pool's threads); its late
    output still reaches the sink. Call :meth:`aclose` when done with the runner.
    """

    def __init__(
        self, *, capture_output: bool = True, cancel_grace: float = 0.5, max_threads: int = 32
    ) -> None:
        self._capture_output = capture_output
        self._cancel_grace = cancel_grace
        self._threads = ThreadPoolExecutor(max_threads, thread_name_prefix="tickwork-task")
        self._targets: dict[str, _Target] = {}

    async def aclose(self) -> None:
        """Stop the thread pool; sync functions still running finish in the background."""
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        """Execute one attempt; see the class docstring and ``tickwork.ports.Runner``."""
        try:
            spec = parse_python_spec(task_run.config)
            target = self._targets.get(spec.target) or await self._load(spec.target)
        except (ValidationError, TargetError) as exc:
            return RunResult(ok=False, error=str(exc))
        if cancel.is_set():
            return ended(Ending.CANCELLED, task_run.timeout)
        if self._capture_output:
            capture.install()
        output = capture.LineBufferedSink(log)
        try:
            return await self._call(target, spec.kwargs, output, task_run.timeout, cancel)
        finally:
            output.close()

    async def _load(self, name: str) -> _Target:
        # A first import reads files and runs module code: keep that off the loop.
        function = await asyncio.to_thread(resolve_target, name)
        target = _Target(function, inspect.iscoroutinefunction(function))
        self._targets[name] = target
        return target

    async def _call(
        self,
        target: _Target,
        kwargs: Mapping[str, Any],
        output: capture.LineBufferedSink,
        timeout: float | None,
        cancel: asyncio.Event,
    ) -> RunResult:
        try:
            work = self._start(target, kwargs, output)
        except TypeError as exc:  # an async function called with the wrong kwargs
            return _failure(exc, output)
        if target.is_async:
            # Let the coroutine take its first step: many finish in it, and then the cancel
            # watcher that wait_for_end needs is not worth creating.
            await asyncio.sleep(0)
        ending = Ending.DONE if work.done() else await wait_for_end(work, timeout, cancel)
        if ending is Ending.DONE:
            return _finished(work, output)
        work.add_done_callback(_discard_outcome)
        if target.is_async:
            work.cancel()
            await asyncio.wait({work}, timeout=self._cancel_grace)
        else:
            output.write("system", f"{ending.value}: the function's thread runs on\n")
        return ended(ending, timeout)

    def _start(
        self, target: _Target, kwargs: Mapping[str, Any], output: capture.LineBufferedSink
    ) -> asyncio.Future[Any]:
        # The attempt runs in a copy of this context in which its sink is bound; that is
        # what routes its prints (and only its prints) to its log.
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        if target.is_async:
            context.run(capture.bind, output)
            return loop.create_task(target.function(**kwargs), context=context)
        context.run(capture.bind, capture.LoopSink(loop, output))
        # What asyncio.to_thread does, without wrapping the future in one more task.
        call = functools.partial(context.run, target.function, **kwargs)
        return loop.run_in_executor(self._threads, call)


def _finished(work: asyncio.Future[Any], output: LogSink) -> RunResult:
    if work.cancelled():
        return RunResult(ok=False, error="CancelledError: the task cancelled itself")
    exc = work.exception()
    if exc is not None:
        return _failure(exc, output)
    value = work.result()
    if value is not None:
        output.write("system", _describe_result(value))
    return RunResult(ok=True, result=value)


def _failure(exc: BaseException, output: LogSink) -> RunResult:
    tb = _user_frames(exc.__traceback__)
    output.write("stderr", "".join(traceback.format_exception(type(exc), exc, tb)))
    message = str(exc)
    name = type(exc).__name__
    return RunResult(ok=False, error=f"{name}: {message}" if message else name)


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    while tb is not None and tb.tb_next is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if not module.startswith(_PLUMBING):
            break
        tb = tb.tb_next
    return tb


def _describe_result(value: Any) -> str:
    """The log line naming a result: its JSON, cut to ``RESULT_LINE_MAX`` characters (a
    result refused for its size must not reach the log whole either)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return f"result is not JSON-serializable: {type(value).__name__}\n"
    if len(text) > RESULT_LINE_MAX:
        text = f"{text[:RESULT_LINE_MAX]}… ({len(text)} characters in all)"
    return f"result: {text}\n"


def _discard_outcome(work: asyncio.Future[Any]) -> None:
    # An abandoned attempt's exception has nobody to go to; retrieving it keeps asyncio
    # from logging "exception was never retrieved".
    if not work.cancelled():
        work.exception()
