"""Python tasks used by the engine tests (imported by the worker through their import path)."""

from __future__ import annotations

from pathlib import Path


def noop() -> None:
    return None


def hello(name: str) -> str:
    print(f"hello {name}")
    return f"hi {name}"


def fail_until(counter: str, successes_after: int) -> int:
    """Fail until called ``successes_after`` times; the count lives in a file the test reads."""
    path = Path(counter)
    calls = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(calls))
    if calls <= successes_after:
        raise RuntimeError(f"failing call {calls}")
    return calls


def huge_result(size: int) -> str:
    """A result far over the result limit: refused as a result, and kept out of the log."""
    return "r" * size


def chatty(lines: int, width: int) -> None:
    for i in range(lines):
        print(f"{i:08d}" + "." * width)


def current_trace() -> str:
    """The OpenTelemetry span context this task runs in (``trace id-span id``, hex)."""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}-{context.span_id:016x}"


def sleep_with_pid(pidfile: str, seconds: float) -> None:
    """Write the task process's pid, then block (a worker must kill this process to stop it)."""
    import os
    import time

    Path(pidfile).write_text(str(os.getpid()))
    time.sleep(seconds)
