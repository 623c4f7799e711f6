"""Callbacks of finished attempts (``on_success``, ``on_failure``, ``on_retry``) and of run
alerts (``on_missed``, ``on_sla_miss``).

Webhooks and python functions, run in the background by :class:`Hooks` after an outcome is
stored. A callback that fails is logged (also into the task run's log, with
:class:`CallbackErrorLog`) and never changes the run's outcome.
"""

from tickwork.hooks.alert_context import AlertContext
from tickwork.hooks.context import CallbackContext, CallbackFailed, event_for
from tickwork.hooks.executor import ErrorSink, Hooks
from tickwork.hooks.tail import LogTail
from tickwork.hooks.task_log import CallbackErrorLog
from tickwork.hooks.webhook import UrlCheck

__all__ = [
    "AlertContext",
    "CallbackContext",
    "CallbackErrorLog",
    "CallbackFailed",
    "ErrorSink",
    "Hooks",
    "LogTail",
    "UrlCheck",
    "event_for",
]
