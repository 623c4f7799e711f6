"""The task runs of a worker pool that have callbacks (``tickwork.hooks``), each with the end
of its attempt's output, kept until its outcome is stored and its callbacks fire."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tickwork.core.model import Outcome, TaskRun
from tickwork.hooks import Hooks, LogTail


@dataclass(frozen=True, slots=True)
class _Hooked:
    task_run: TaskRun
    tail: LogTail


class HookedRuns:
    """Callbacks fire once a task run's outcome is stored; only task runs that have callbacks
    keep a log tail (``tail_for``)."""

    def __init__(self, hooks: Hooks | None) -> None:
        self._hooks = hooks
        self._hooked: dict[str, _Hooked] = {}  # task run id -> until its callbacks fire

    def tail_for(self, task_run: TaskRun) -> LogTail | None:
        """The tail to keep of this attempt's output, if the task run has callbacks."""
        if self._hooks is None or not task_run.callbacks:
            return None
        tail = LogTail()
        self._hooked[task_run.id] = _Hooked(task_run, tail)
        return tail

    def forget(self, task_run: TaskRun) -> None:
        """This attempt ends without an outcome from us: its callbacks never fire here."""
        hooked = self._hooked.get(task_run.id)
        if hooked is not None and hooked.task_run.attempt == task_run.attempt:
            del self._hooked[task_run.id]

    def drop(self, task_run_id: str) -> None:
        """No outcome will come for the task run's attempt (whichever it is)."""
        self._hooked.pop(task_run_id, None)

    def fire(self, outcomes: Sequence[Outcome], applied: Sequence[str]) -> None:
        """Fire the callbacks of the outcomes the store took (``applied``: their task run ids)."""
        if not self._hooked or self._hooks is None:
            return
        stored = set(applied)  # an outcome the store refused (the reaper was first) fires none
        for outcome in outcomes:
            hooked = self._hooked.pop(outcome.task_run_id, None)
            if hooked is not None and outcome.task_run_id in stored:
                self._hooks.fire(hooked.task_run, outcome, hooked.tail.text())
