"""The callback executor: runs hooks in the background, bounded, and never lets them matter."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx2

from tickwork.core.errors import NotFound, TickworkError
from tickwork.core.model import Callback, Outcome, TaskKind, TaskRun
from tickwork.core.secret_refs import secret_names
from tickwork.hooks.alert_context import AlertContext
from tickwork.hooks.callables import PythonCallbacks
from tickwork.hooks.context import CallbackContext, CallbackFailed, event_for
from tickwork.hooks.webhook import UrlCheck, post_webhook
from tickwork.observe import tracing
from tickwork.security.masking import MASK
from tickwork.security.ssrf import UrlGuard

log = logging.getLogger("tickwork.hooks")

#: What a callback is called with: an attempt's context, or a run alert's.
Context = CallbackContext | AlertContext
#: Told whether an alert callback ran to its end (True) or was dropped or cancelled (False).
Done = Callable[[bool], None]
#: Resolves ``{"$secret": NAME}`` in a callback's config: the config resolved and the values
#: used (``security.secrets.resolve_secrets`` bound to a store and a key).
SecretResolve = Callable[[Mapping[str, Any]], Awaitable[tuple[Mapping[str, Any], list[str]]]]

#: Also told of every callback that failed: ``(task_run_id, attempt, message)``, the message
#: one line such as ``on_failure callback failed: timed out after 10 s``.
ErrorSink = Callable[[str, int, str], None]

DEFAULT_TIMEOUT = 10.0
DEFAULT_CONCURRENCY = 8
DEFAULT_BACKLOG = 1000
CANCEL_WAIT = 1.0  # seconds close() waits for cancelled callbacks to unwind
MIN_MASKED = 4  # shorter values are not masked in messages ("1" would blank them out)


class Hooks:
    """Runs the ``on_success`` / ``on_failure`` / ``on_retry`` callbacks of finished attempts.

    :meth:`fire` only schedules: callbacks run in the background, at most ``concurrency`` at
    once, each bounded by ``timeout`` seconds. At most ``backlog`` callbacks are held
    (running or waiting for a slot); more are dropped. A callback that fails in any way (bad
    config, import error, exception, timeout, non-2xx answer, SSRF refusal, dropped) is
    logged at WARNING with its task run and event, and reported to ``on_error``; it never
    changes the run's outcome, which is written before its callbacks fire.

    A webhook's ``{"$secret": NAME}`` references (``headers``, ``url_auth``) are resolved by
    ``secrets`` right before it is sent (here: the worker or the reaper that stored the
    outcome), and the values are masked in what a failure reports.

    Webhooks are POSTed through ``client`` (one of its own if none is given; redirects are
    not followed) after ``url_guard`` has seen the URL, at send time; without a guard,
    ``UrlGuard()`` refuses every private, loopback or link-local target. Call :meth:`close`
    when done.
    """

    def __init__(
        self,
        *,
        url_guard: UrlCheck | None = None,
        client: httpx2.AsyncClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        concurrency: int = DEFAULT_CONCURRENCY,
        backlog: int = DEFAULT_BACKLOG,
        on_error: ErrorSink | None = None,
        secrets: SecretResolve | None = None,
    ) -> None:
        self._guard = url_guard or UrlGuard().check
        self._secrets = secrets
        self._owns_client = client is None
        self._client = client or httpx2.AsyncClient(follow_redirects=False)
        self._python = PythonCallbacks(max_threads=concurrency)
        self._timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)
        self._backlog = backlog
        self._on_error = on_error
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def timeout(self) -> float:
        """Seconds a callback may run before it is given up on."""
        return self._timeout

    @property
    def pending(self) -> int:
        """Callbacks accepted and not finished yet (running or waiting for a slot)."""
        return len(self._tasks)

    def fire_alert(
        self, callback: Callback, context: AlertContext, on_done: Done | None = None
    ) -> None:
        """Schedule ``callback`` (a job's ``on_missed`` / ``on_sla_miss``) with ``context``.
        Returns at once and never raises. Call it once the alert is recorded.

        ``on_done(True)`` once the callback ran to its end: delivered, or failed the way an
        ``on_failure`` callback fails for good (logged, not tried again); ``on_done(False)``
        if it was dropped or cancelled before that (it may be fired again)."""
        try:
            self._schedule(callback, context, f"hook:{context.event}:{context.run_id}", on_done)
        except Exception:  # a bug here must not reach the scheduler
            log.exception("%s callback of run %s not fired", context.event, context.run_id)

    def fire(self, task_run: TaskRun, outcome: Outcome, log_tail: str = "") -> None:
        """Schedule the callback of ``task_run`` for the event ``outcome`` stands for, if it
        has one. Returns at once and never raises. Call it once the outcome is stored."""
        try:
            self._fire(task_run, outcome, log_tail)
        except Exception:  # a bug here must not reach the worker or the reaper
            log.exception("callbacks of task run %s not fired", task_run.id)

    async def close(self, grace: float) -> None:
        """Take no more callbacks; wait up to ``grace`` s for running and waiting ones, then
        cancel the rest (a sync python callback's thread runs on: threads cannot be killed)."""
        self._closed = True
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=CANCEL_WAIT)
        self._python.close()
        if self._owns_client:
            await self._client.aclose()

    def _fire(self, task_run: TaskRun, outcome: Outcome, log_tail: str) -> None:
        event = event_for(outcome.state)
        callback = None if event is None else task_run.callbacks.get(event)
        if event is None or callback is None:
            return
        context = CallbackContext.of(event, task_run, outcome, log_tail)
        self._schedule(callback, context, f"hook:{event}:{task_run.id}")

    def _schedule(
        self, callback: Callback, context: Context, name: str, on_done: Done | None = None
    ) -> None:
        if self._closed or len(self._tasks) >= self._backlog:
            why = "shutting down" if self._closed else f"{self._backlog} callbacks already pending"
            self._failed(context, f"dropped: {why}")
            _tell(on_done, False)
            return
        task = asyncio.get_running_loop().create_task(self._run(callback, context), name=name)
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._done, context, on_done))

    def _done(self, context: Context, on_done: Done | None, task: asyncio.Task[None]) -> None:
        # Here rather than in _run: a task cancelled before its first step never runs _run.
        self._tasks.discard(task)
        if task.cancelled():
            self._failed(context, "cancelled: tickwork stopped before it finished")
        _tell(on_done, not task.cancelled())

    async def _run(self, callback: Callback, context: Context) -> None:
        async with self._slots:
            if tracing.enabled():
                with tracing.callback_span(context):
                    await self._call(callback, context)
            else:
                await self._call(callback, context)

    async def _call(self, callback: Callback, context: Context) -> None:
        deadline = asyncio.timeout(self._timeout)
        try:
            async with deadline:
                await self._deliver(callback, context)
        except CallbackFailed as exc:
            self._failed(context, str(exc))
        except Exception as exc:  # the deadline, or whatever the user's function raised
            if deadline.expired():
                self._failed(context, f"timed out after {self._timeout:g} s")
            else:
                self._failed(context, f"raised {_describe(exc)}", exc)
        else:
            log.debug("%s callback of %s done", context.event, _subject(context))

    async def _deliver(self, callback: Callback, context: Context) -> None:
        if callback.kind is TaskKind.HTTP:
            config, values = await self._resolved(callback.config)
            try:
                await post_webhook(self._client, self._guard, config, context)
            except CallbackFailed as exc:
                raise CallbackFailed(_masked(str(exc), values)) from None
        elif callback.kind is TaskKind.PYTHON:
            await self._python.call(callback.config, context)
        else:
            kind = callback.kind.value
            raise CallbackFailed(f"a {kind} callback cannot run: use http or python")

    async def _resolved(self, config: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
        if not secret_names(config):
            return config, []
        if self._secrets is None:
            raise CallbackFailed("secret references cannot be resolved by this process")
        try:
            return await self._secrets(config)
        except NotFound as exc:
            raise CallbackFailed(f"secret {exc.key!r} does not exist") from None
        except TickworkError as exc:  # no key, or one that cannot decrypt
            raise CallbackFailed(str(exc)) from None

    def _failed(self, context: Context, message: str, exc: BaseException | None = None) -> None:
        if isinstance(context, AlertContext):  # no attempt, so no task log to write into
            log.warning(
                "%s callback of run %s failed: %s", context.event, context.run_id, message,
                exc_info=exc,
            )  # fmt: skip
            return
        log.warning(
            "%s callback of task run %s (attempt %d) failed: %s",
            context.event,
            context.task_run_id,
            context.attempt,
            message,
            exc_info=exc,
        )
        if self._on_error is None:
            return
        try:
            self._on_error(
                context.task_run_id, context.attempt, f"{context.event} callback failed: {message}"
            )
        except Exception:
            log.exception("on_error of task run %s failed", context.task_run_id)


def _tell(on_done: Done | None, finished: bool) -> None:
    if on_done is None:
        return
    try:
        on_done(finished)
    except Exception:  # the caller's bookkeeping must not break the executor
        log.exception("on_done of a callback failed")


def _subject(context: Context) -> str:
    if isinstance(context, AlertContext):
        return f"run {context.run_id}"
    return f"task run {context.task_run_id}"


def _masked(message: str, values: list[str]) -> str:
    parts = {p for v in values for p in (v, *v.split(":", 1)) if len(p) >= MIN_MASKED}
    for value in sorted(parts, key=len, reverse=True):
        message = message.replace(value, MASK)
    return message


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
