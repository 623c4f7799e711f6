"""Small builders and a deadline poller shared by runtime tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from tickwork.core.model import Job, RetryPolicy, Schedule, ScheduleKind, Task, TaskKind
from tickwork.ids import new_id

if TYPE_CHECKING:
    from tickwork.ports import Store
    from tickwork.serve.embedded import Embedded

T = TypeVar("T")


def utc(year: int, month: int, day: int, *hms: int) -> datetime:
    """An aware UTC datetime: ``utc(2026, 3, 2, 10, 5)``; up to hour, minute, second, µs."""
    hour, minute, second, micro = (*hms, 0, 0, 0, 0)[:4]
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def python_task(target: str = "tests.fixtures.tasks:noop", **kwargs: Any) -> Task:
    return Task(name="main", kind=TaskKind.PYTHON, config={"target": target, "kwargs": kwargs})


def shell_task(*argv: str) -> Task:
    return Task(name="main", kind=TaskKind.SHELL, config={"argv": list(argv)})


def make_job(
    name: str,
    *,
    now: datetime,
    schedule: Schedule | None = None,
    task: Task | None = None,
    catchup: bool = False,
    next_fire_at: datetime | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | None = None,
) -> Job:
    return Job(
        id=new_id(),
        name=name,
        schedule=schedule or Schedule(kind=ScheduleKind.NOW),
        tasks=(task or python_task(),),
        created_at=now,
        updated_at=now,
        catchup=catchup,
        next_fire_at=next_fire_at,
        retry=retry or RetryPolicy(),
        timeout=timeout,
    )


async def eventually(
    probe: Callable[[], Awaitable[T]],
    ok: Callable[[T], bool],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
) -> T:
    """Poll ``probe`` until ``ok`` holds; fail with the last value after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout}s; last value: {value!r}")
        await asyncio.sleep(interval)


class Wakes:
    """A scheduler ``wake`` callback that counts how often it was called."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


@contextlib.asynccontextmanager
async def running_engine(store: Store, concurrency: int) -> AsyncIterator[Embedded]:
    """Embedded mode wired on ``store``, its scheduler and worker pool running (output
    captured); drained (2 s) and stopped on exit. For tests that run work end to end in
    process."""
    from tickwork.app.settings import Settings
    from tickwork.serve.wiring import wire
    from tickwork.worker import capture

    rt = wire(store, Settings(concurrency=concurrency))
    capture.install()
    tasks = [asyncio.create_task(rt.scheduler.run()), asyncio.create_task(rt.pool.run())]
    try:
        yield rt
    finally:
        await rt.pool.drain(2.0)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        capture.uninstall()
