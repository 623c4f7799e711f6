"""Callbacks of finished attempts (``on_success``, ``on_failure``, ``on_retry``).

Webhooks and python functions, run in the background by :class:`Hooks` after an outcome is
stored. A callback that fails is logged and never changes the run's outcome.
"""

from tickwork.hooks.context import CallbackContext, CallbackFailed, event_for
from tickwork.hooks.executor import ErrorSink, Hooks
from tickwork.hooks.tail import LogTail
from tickwork.hooks.webhook import UrlCheck

__all__ = [
    "CallbackContext",
    "CallbackFailed",
    "ErrorSink",
    "Hooks",
    "LogTail",
    "UrlCheck",
    "event_for",
]
