"""Python callbacks: ``module:function`` called with the context, sync ones in threads."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tickwork.hooks.alert_context import AlertContext
from tickwork.hooks.context import CallbackContext, CallbackFailed
from tickwork.runtime.targets import TargetError, resolve_target

_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class PythonCallbacks:
    """Imports callback targets once each and calls them with a :class:`CallbackContext`.

    ``async def`` functions are awaited on the loop; plain functions run in a pool of up to
    ``max_threads`` threads of their own (not the loop's default pool, which DNS lookups
    need). A sync function that outlives its timeout cannot be stopped: it keeps its thread
    until it returns. Call :meth:`close` when done.
    """

    def __init__(self, max_threads: int) -> None:
        self._threads = ThreadPoolExecutor(max_threads, thread_name_prefix="tickwork-hook")
        self._functions: dict[str, Callable[..., Any]] = {}

    async def call(
        self, config: Mapping[str, Any], context: CallbackContext | AlertContext
    ) -> None:
        """Call the callback's ``target``; its exceptions propagate as they are."""
        target = config.get("target")
        if not isinstance(target, str) or not _TARGET.match(target):
            raise CallbackFailed("config.target: must look like 'module.path:function'")
        function = self._functions.get(target) or await self._load(target)
        if inspect.iscoroutinefunction(function):
            await function(context)
        else:
            await asyncio.get_running_loop().run_in_executor(self._threads, function, context)

    def close(self) -> None:
        """Stop the thread pool; sync functions still running finish in the background."""
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def _load(self, target: str) -> Callable[..., Any]:
        # A first import reads files and runs module code: keep that off the loop.
        loop = asyncio.get_running_loop()
        try:
            function = await loop.run_in_executor(self._threads, resolve_target, target)
        except TargetError as exc:
            raise CallbackFailed(str(exc)) from None
        self._functions[target] = function
        return function
