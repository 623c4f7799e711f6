"""The SSRF guard at save time: every URL a job will call, its http tasks' and its webhooks'.

The worker checks again before each request (DNS may change in between); refusing here gives
the author a clear 422 on the field instead of a failed run later.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence

from tickwork.core.errors import ValidationError
from tickwork.core.model import Callbacks, Job, TaskKind
from tickwork.security.ssrf import TargetRefused

#: Raises ``TargetRefused`` for a URL tickwork may not call.
UrlGuard = Callable[[str], Awaitable[None]]


async def check_targets(guard: UrlGuard | None, jobs: Sequence[Job]) -> None:
    """Refuse a job whose http task or http callback calls a URL ``guard`` forbids, with a
    ``ValidationError`` on that url (``tasks[0].config.url``, ``callbacks.on_failure.url``;
    ``jobs[i].`` first when several jobs are checked). Without a guard, every URL passes."""
    if guard is None:
        return
    for i, job in enumerate(jobs):
        where = f"jobs[{i}]." if len(jobs) > 1 else ""
        for field, url in urls_of(job):
            try:
                await guard(url)
            except TargetRefused as e:
                raise ValidationError(f"{where}{field}", str(e)) from None


def urls_of(job: Job) -> Iterator[tuple[str, str]]:
    """(field, url) of every URL the job calls: http tasks, then task and job webhooks."""
    for j, task in enumerate(job.tasks):
        url = task.config.get("url")
        if task.kind is TaskKind.HTTP and isinstance(url, str):
            yield f"tasks[{j}].config.url", url
        yield from _hook_urls(task.callbacks, f"tasks[{j}].callbacks")
    yield from _hook_urls(job.callbacks, "callbacks")


def _hook_urls(callbacks: Callbacks, field: str) -> Iterator[tuple[str, str]]:
    for event, hook in callbacks.items():
        url = hook.config.get("url")
        if hook.kind is TaskKind.HTTP and isinstance(url, str):
            yield f"{field}.{event}.url", url
