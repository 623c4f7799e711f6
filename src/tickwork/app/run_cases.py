"""The use cases on runs: list, inspect, cancel, retry and replay runs and their task
runs, and read their logs (``Services`` is made of these and the rest)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from tickwork.app.checks import check_limit, require_aware
from tickwork.app.logs import pick_task_run, read_log_page
from tickwork.app.records import FINISHED_RUN_STATES, LogPage
from tickwork.core.errors import Conflict, NotFound, ValidationError
from tickwork.core.model import Job, RunDetail, RunState, RunTrigger, TaskRun
from tickwork.core.states import RETRYABLE, TERMINAL
from tickwork.ports import CancelSignals, DeadLetterPage, RunFilter, RunPage, Store, TimeWindow

#: What ``list_runs(state=...)`` accepts: a run state, or ``dead`` for dead-lettered runs.
RUN_STATE_FILTERS: tuple[str, ...] = (*(s.value for s in RunState), "dead")


class RunCases:
    """Runs and task runs, over ``store``; ``Services`` provides the attributes and the job
    lookups below."""

    store: Store
    _clock: Callable[[], datetime]
    _wake: Callable[[], None]
    _cancels: CancelSignals | None
    #: The job of a name (``NotFound`` otherwise), and the id its history is kept under.
    get_job: Callable[[str], Awaitable[Job]]
    _history_job_id: Callable[[str], Awaitable[str]]

    async def list_runs(
        self,
        *,
        job: str | None = None,
        state: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        window: TimeWindow | None = None,
        also: RunFilter | None = None,
    ) -> RunPage:
        """Runs newest first; ``job`` is a job name, ``state`` a run state or ``dead``,
        ``window`` bounds the logical date and the start time, ``also`` the trigger and a
        tag of the job."""
        check_limit(limit, 1000)
        if state is not None and state not in RUN_STATE_FILTERS:
            raise ValidationError("state", f"must be one of {', '.join(RUN_STATE_FILTERS)}")
        if also is not None and also.trigger not in (None, *RunTrigger):
            raise ValidationError("trigger", f"must be one of {', '.join(RunTrigger)}")
        for name in TimeWindow.__slots__:
            require_aware(getattr(window, name, None), name)
        job_id = await self._history_job_id(job) if job is not None else None
        return await self.store.list_runs(
            job_id=job_id, state=state, limit=limit, cursor=cursor, window=window, also=also
        )

    async def dead_letters(
        self, *, job: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> DeadLetterPage:
        """Task runs that failed their last attempt, newest first; replay with ``retry_run``."""
        check_limit(limit, 1000)
        job_id = (await self.get_job(job)).id if job is not None else None
        return await self.store.dead_letters(job_id=job_id, limit=limit, cursor=cursor)

    async def get_run(self, run_id: str) -> RunDetail:
        """A run with its task runs and finished attempts; ``NotFound`` otherwise."""
        detail = await self.store.get_run(run_id)
        if detail is None:
            raise NotFound("run", run_id)
        return detail

    async def cancel_run(self, run_id: str) -> RunDetail:
        """Cancel a run: tasks at rest stop at once, running ones are killed by their worker.

        Workers learn of the request at once through the cancel signals, or through their
        heartbeat within about a second.
        """
        detail = await self.get_run(run_id)
        if detail.run.state in FINISHED_RUN_STATES:
            raise Conflict("run", f"run {run_id} has already finished ({detail.run.state})")
        await self._tell_workers(await self.store.cancel_run(run_id, self._clock()))
        return await self.get_run(run_id)

    async def retry_run(self, run_id: str) -> RunDetail:
        """Give a run's failed, upstream-failed or cancelled task runs one more attempt."""
        await self.get_run(run_id)
        changed = await self.store.retry_run(run_id, self._clock())
        if not changed:
            raise Conflict(
                "run", f"run {run_id} has no failed, upstream_failed or cancelled task to retry"
            )
        self._wake()
        return await self.get_run(run_id)

    async def replay_run(self, run_id: str) -> RunDetail:
        """Mark a finished run for replay: every task runs again (one more attempt each,
        due now, the history kept), in DAG order; ``Conflict`` while the run is unfinished."""
        detail = await self.get_run(run_id)
        if detail.run.state not in FINISHED_RUN_STATES:
            raise Conflict(
                "run", f"run {run_id} is {detail.run.state}; only a finished run can be replayed"
            )
        if not await self.store.replay_run(run_id, self._clock()):
            raise Conflict("run", f"run {run_id} changed meanwhile; look at it again")
        self._wake()
        return await self.get_run(run_id)

    async def cancel_task_run(self, task_run_id: str) -> RunDetail:
        """Cancel one task of a run: at rest it stops at once, running it is killed by its
        worker (told through the cancel signals, the heartbeat as a fallback). Tasks below it
        whose trigger rule can no longer hold become upstream_failed. Returns the task run's
        run, state refreshed."""
        task_run = await self._task_run(task_run_id)
        if task_run.state in TERMINAL:
            raise Conflict(
                "task_run", f"task run {task_run_id} has already finished ({task_run.state})"
            )
        await self._tell_workers(await self.store.cancel_task_run(task_run_id, self._clock()))
        self._wake()  # a downstream with all_done / one_failed may have become ready
        return await self.get_run(task_run.run_id)

    async def retry_task_run(self, task_run_id: str) -> RunDetail:
        """Give one failed, upstream-failed or cancelled task run one more attempt, due now."""
        task_run = await self._task_run(task_run_id)
        if task_run.state not in RETRYABLE:
            accepted = ", ".join(sorted(RETRYABLE))
            raise Conflict(
                "task_run",
                f"task run {task_run_id} is {task_run.state}; only {accepted} can be retried",
            )
        # Conditional in the store: had it changed meanwhile (retried already), nothing moves.
        if await self.store.retry_task_run(task_run_id, self._clock()):
            self._wake()
        return await self.get_run(task_run.run_id)

    async def logs(
        self, run_id: str, *, task: str | None = None, after_seq: int = -1, limit: int = 1000
    ) -> LogPage:
        """Captured output of one task of a run after ``after_seq``, in order.

        ``task`` names the task; it may be left out when the run has a single task.
        """
        check_limit(limit, 10_000)
        detail = await self.get_run(run_id)
        task_run = pick_task_run(detail, task)
        chunks = await read_log_page(self.store, task_run.id, after_seq, limit)
        return LogPage(
            run_id=run_id,
            task_run_id=task_run.id,
            chunks=chunks,
            next_after_seq=chunks[-1].seq if chunks else after_seq,
            run_state=detail.run.state,
        )

    async def _tell_workers(self, running: Sequence[TaskRun]) -> None:
        """Signal the workers of running task runs whose cancellation was just requested."""
        if running and self._cancels is not None:
            await self._cancels.request([(tr.id, tr.attempt) for tr in running])

    async def get_task_run(self, task_run_id: str) -> TaskRun:
        """A task run; ``NotFound`` otherwise."""
        return await self._task_run(task_run_id)

    async def _task_run(self, task_run_id: str) -> TaskRun:
        task_run = await self.store.get_task_run(task_run_id)
        if task_run is None:
            raise NotFound("task_run", task_run_id)
        return task_run
