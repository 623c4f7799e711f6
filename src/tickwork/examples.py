"""Example tasks for the README tour, smoke checks and benchmarks.

They ship with tickwork, so every worker can import them: ``tickwork.examples:hello``.
"""

from __future__ import annotations

import asyncio


def hello(name: str = "world") -> str:
    """Print a greeting (captured into the run's log) and return it (logged as the result)."""
    greeting = f"hello, {name}"
    print(greeting)
    return greeting


def fail(message: str = "this task always fails") -> None:
    """Raise, to see retries and the dead-letter list at work."""
    raise RuntimeError(message)


def noop() -> None:
    """Do nothing: measures tickwork's own overhead."""


async def anoop() -> None:
    """Do nothing, asynchronously."""


async def sleep(seconds: float = 1.0) -> None:
    """Wait without blocking the worker (try cancelling it)."""
    await asyncio.sleep(seconds)
