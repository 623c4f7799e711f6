"""Process logging: ``text`` (one readable line) or ``json`` (one object per line), with the
context bound to what the line is about, and secrets masked in both.

Context travels in a ``contextvars`` variable, so what ``bind`` sets around a task attempt
(``job``, ``run_id``, ``task_run_id``, ``attempt``) reaches every line logged inside it, in
the tasks it spawns too; process-wide fields (``worker``, ``epoch``) are set once with
``set_process_fields``.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
FORMATS: tuple[LogFormat, ...] = ("text", "json")

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "tickwork_log", default=None
)
_process: dict[str, Any] = {}

#: Libraries that log a line per request at INFO: quiet unless they warn.
CHATTY = ("httpx2", "httpx", "httpcore", "alembic", "uvicorn.access")

#: What never reaches a log: a URL's password, a bearer token, a ``token=``/``password=``
#: value, and our token secrets (``tw_...``).
_SECRETS = (
    (re.compile(r"(\w+://[^/\s:@]*:)[^@\s/]+@"), r"\1***@"),
    (re.compile(r"(?i)(bearer\s+)[^\s\"',]+"), r"\1***"),
    (re.compile(r"(?i)\b((?:password|passwd|secret|token|api_key)=)[^\s\"',&]+"), r"\1***"),
    (
        re.compile(r"(?i)(\"(?:password|passwd|secret|token|authorization)\"\s*:\s*\")[^\"]+"),
        r"\1***",
    ),
)


def mask(text: str) -> str:
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every line logged inside the block (and in tasks started in it)."""
    given = {k: v for k, v in fields.items() if v is not None}
    token = _context.set((_context.get() or {}) | given)
    try:
        yield
    finally:
        _context.reset(token)


def bind_attempt(task_run: Any) -> contextvars.Token[dict[str, Any] | None]:
    """``bind`` for one task attempt, without a context manager's cost (it runs per job)."""
    fields = {
        "job": task_run.job_name,
        "run_id": task_run.run_id,
        "task_run_id": task_run.id,
        "attempt": task_run.attempt,
    }
    outer = _context.get()
    return _context.set(fields if outer is None else outer | fields)


def unbind(token: contextvars.Token[dict[str, Any] | None]) -> None:
    _context.reset(token)


def set_process_fields(**fields: Any) -> None:
    """Fields of every line this process logs (``worker``, ``epoch``); None removes one. A
    callable is called for each line (the epoch changes with the leadership)."""
    for key, value in fields.items():
        if value is None:
            _process.pop(key, None)
        else:
            _process[key] = value


def bound() -> dict[str, Any]:
    fields = {k: v() if callable(v) else v for k, v in _process.items()}
    return {k: v for k, v in fields.items() if v is not None} | (_context.get() or {})


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", ...context, "exc"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": mask(record.getMessage()),
        }
        line |= bound()
        if record.exc_info:
            line["exc"] = mask(self.formatException(record.exc_info))
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """The classic line, with the bound context appended as ``key=value`` and secrets masked."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = bound()
        if context:
            text += " " + " ".join(f"{k}={v}" for k, v in context.items())
        return mask(text)


def configure_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    """Log to stderr in ``fmt`` (``text`` or ``json``); chatty libraries only from WARNING."""
    if fmt not in FORMATS:
        from tickwork.core.errors import ValidationError

        raise ValidationError("log_format", f"must be one of {', '.join(FORMATS)}, not {fmt!r}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in CHATTY:
        logging.getLogger(name).setLevel(logging.WARNING)
