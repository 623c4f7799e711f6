"""The worker pool: consume, claim in batches, execute, heartbeat, complete in batches."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import LogChunk, Outcome, TaskKind, TaskRun
from tickwork.core.results import resolve_results
from tickwork.hooks import Hooks
from tickwork.ports import (
    Broker,
    CancelSignals,
    Completion,
    Delivery,
    ExecutionStore,
    Runner,
    RunResult,
    TaskKey,
)
from tickwork.runtime.batch import Batcher
from tickwork.runtime.cancel import CancelSignal
from tickwork.runtime.retry import through_outages
from tickwork.runtime.slots import Slots
from tickwork.runtime.supervisor import supervise
from tickwork.worker.config import ACK_ENOUGH, ACK_LINGER, DRAIN_WRITE_TIMEOUT, PoolConfig
from tickwork.worker.early_cancels import EarlyCancels
from tickwork.worker.hooked import HookedRuns
from tickwork.worker.logs import TaskLog, log_max_bytes
from tickwork.worker.outcomes import outcome_of
from tickwork.worker.starts import HeldStarts

log = logging.getLogger("tickwork.worker")


@dataclass(slots=True)
class _Active:
    task_run: TaskRun
    cancel: CancelSignal  # an asyncio.Event that runners can also get called back by
    task: asyncio.Task[None] | None = None
    started: bool = False  # holds a slot (False: claimed ahead, still waiting)
    since: float = 0.0  # time.monotonic() when it got its slot
    held: bool = False  # a heartbeat marked it unstarted in the store: ``start`` it first
    ahead: bool = False  # started in the store ahead of its slot (``HeldStarts``), still waiting
    abandoned: bool = False  # the store gave it to someone else: stop it, report nothing


async def _wait_set(event: asyncio.Event, timeout: float) -> None:
    """Wait until ``event`` is set, for at most ``timeout`` seconds."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)


def with_inputs(task_run: TaskRun) -> TaskRun:
    """The task run with ``{"$result": name}`` in its config replaced by upstream results."""
    if not task_run.upstream:
        return task_run
    return replace(task_run, config=resolve_results(task_run.config, task_run.inputs))


class WorkerPool:
    """Executes task runs from the broker; the store decides who runs what (claim).

    A delivery is only a hint: nothing runs until the conditional claim in the store wins,
    so a duplicate or stale message runs nothing. A delivery is acked once the store has
    what it led to: at once when its claim lost, after the completion was written when it
    ran. Cancel requests arrive through ``cancels`` at once, and through the heartbeat's
    reply otherwise. With ``hooks``, the callbacks of a task run fire once its outcome is
    stored; only task runs that have callbacks keep a log tail.
    """

    def __init__(
        self,
        store: ExecutionStore,
        broker: Broker,
        runners: Mapping[TaskKind, Runner],
        config: PoolConfig,
        *,
        clock: Callable[[], datetime],
        rand: Callable[[], float],
        on_complete: Callable[[Sequence[Outcome], Completion], None] = lambda _o, _c: None,
        hooks: Hooks | None = None,
        cancels: CancelSignals | None = None,
    ) -> None:
        self._store = store
        self._broker = broker
        self._runners = runners
        self._config = config
        self._clock = clock
        self._rand = rand
        self._on_complete = on_complete
        self._hooked = HookedRuns(hooks)
        self._active: dict[str, _Active] = {}
        self._slots = Slots(config.concurrency)
        self._room = asyncio.Event()  # set when a held task run finishes
        self._avg_duration = config.expected_duration  # seconds; moving average of attempts
        self._draining = asyncio.Event()
        self._fetch_idle = asyncio.Event()  # clear while a consume is in flight
        self._fetch_idle.set()
        self._logs: Batcher[LogChunk] = Batcher(self._write_logs)
        linger, enough = config.outcome_linger, config.outcome_enough
        self._outcomes = Batcher(self._write_outcomes, linger=linger, enough=enough, busy_only=True)
        self._acks: Batcher[Delivery] = Batcher(broker.ack, linger=ACK_LINGER, enough=ACK_ENOUGH)
        self._unacked: dict[TaskKey, Delivery] = {}  # claimed; acked once their outcome is
        self._cancels = cancels
        self._early_cancels = EarlyCancels()  # signalled before the claim returned
        self._beat_lock = asyncio.Lock()  # a heartbeat's marks land before a ``start``
        self._starts = HeldStarts(self._start_batch, self._next_held)
        self._started_ahead = 0  # task runs with ``ahead`` set
        self._beat_at = time.monotonic()  # when the last heartbeat marked the waiting ones
        self._granted = 0  # slots handed out since then
        self._grant_rate = 0.0  # slots handed out per second between the last two beats

    @property
    def active_count(self) -> int:
        return len(self._active)

    @property
    def concurrency(self) -> int:
        """Tasks run at once now (``resize`` moves it)."""
        return self._slots.limit

    @property
    def busy(self) -> int:
        """Slots running a task now (task runs claimed ahead wait without one)."""
        return self._slots.used

    @property
    def avg_duration(self) -> float:
        """Seconds an attempt takes here: the moving average of finished attempts (a guess
        until measured), or the mean time the running ones have run so far when longer."""
        ages = [a.since for a in self._active.values() if a.started]
        if not ages:
            return self._avg_duration
        running = time.monotonic() - sum(ages) / len(ages)
        return max(self._avg_duration, running)

    def resize(self, concurrency: int) -> None:
        """Run up to ``concurrency`` tasks at once from now; running tasks are not
        interrupted when it shrinks (it takes effect as they finish)."""
        self._slots.resize(concurrency)
        self._room.set()  # more capacity: the fetch loop may take more

    async def run(self) -> None:
        """Run until cancelled; call ``drain`` first for a clean stop (nothing half-written)."""
        loops = {
            "worker.fetch": self._fetch_loop(),
            "worker.heartbeat": self._heartbeat_loop(),
            "worker.logs": self._logs.run(),
            "worker.outcomes": self._outcomes.run(),
            "worker.acks": self._acks.run(),
        }
        if self._cancels is not None:
            loops["worker.cancels"] = self._cancel_loop(self._cancels)
        await supervise(loops)

    async def drain(self, grace: float) -> None:
        """Stop taking work; let running tasks finish within ``grace`` s, then requeue the rest."""
        self._draining.set()
        self._room.set()  # a fetch loop waiting for a slot sees the drain and stops
        tasks = [a.task for a in self._active.values() if a.task is not None]
        if tasks:
            running = sum(a.started for a in self._active.values())
            log.info("draining: waiting up to %g s for %d running task(s)", grace, running)
            _, pending = await asyncio.wait(tasks, timeout=grace)
            pending -= await self._release_unstarted()
            for active in list(self._active.values()):
                active.cancel.set()
            if pending:
                log.warning(
                    "drain: %d task(s) still running after %g s interrupted; they are retried",
                    len(pending),
                    grace,
                )
                await asyncio.wait(pending, timeout=2.0)
        # Bounded: if a batch can no longer be written (the store is gone), the caller's
        # shutdown must still finish; what was not written is recovered as orphans later.
        for batcher in (self._logs, self._outcomes, self._acks):
            try:
                await asyncio.wait_for(batcher.wait_idle(), DRAIN_WRITE_TIMEOUT)
            except TimeoutError:
                log.error("drain: %d unwritten item(s) left behind", batcher.pending())

    async def _release_unstarted(self) -> set[asyncio.Task[None]]:
        """Hand back task runs claimed ahead that never got a slot: nothing ran, so they go
        back to ``queued`` without using an attempt (another worker, or our restart, runs
        them)."""
        waiting = [a for a in self._active.values() if not a.started and a.task is not None]
        if waiting:
            # A consume still in flight could take the messages handed back below, and be
            # cancelled with ``run`` before it hands them on: they would wait for a reclaim.
            await _wait_set(self._fetch_idle, self._config.consume_timeout + 1.0)
        for active in waiting:
            assert active.task is not None
            active.task.cancel()
            del self._active[active.task_run.id]
        keys = [(a.task_run.id, a.task_run.attempt) for a in waiting]
        await through_outages(
            "release", lambda: self._store.release(keys, self._config.worker_id, self._clock())
        )
        # Queued again: hand their messages on at once rather than after a reclaim.
        await self._hand_back([d for k in keys if (d := self._unacked.pop(k, None)) is not None])
        return {a.task for a in waiting if a.task is not None}

    # -- fetching and claiming ---------------------------------------------------------
    async def _fetch_loop(self) -> None:
        while not self._draining.is_set():
            free = await self._wait_for_slots()
            if self._draining.is_set():
                break
            self._fetch_idle.clear()
            try:
                deliveries = await self._broker.consume(
                    self._config.queues, free, self._config.consume_timeout
                )
            finally:
                self._fetch_idle.set()
            if self._draining.is_set():
                await self._hand_back(deliveries)
            elif deliveries:
                await self._claim_and_start(deliveries)
        # Draining: outcomes, logs and acks still have to be written, so this loop must not
        # end (that would stop the others); the caller cancels ``run`` after ``drain``.
        await asyncio.Event().wait()

    async def _hand_back(self, deliveries: Sequence[Delivery]) -> None:
        """Give messages this pool will not run back to the broker for another worker."""
        if deliveries:
            await self._broker.publish([replace(d, receipt=None) for d in deliveries])
            for delivery in deliveries:
                self._acks.put_nowait(delivery)

    def _capacity(self) -> int:
        wait, avg = self._config.prefetch_wait, max(self._avg_duration, 1e-4)
        concurrency = self._slots.limit
        prefetch = min(int(concurrency * wait / avg), self._config.max_prefetch)
        return concurrency + prefetch

    async def _wait_for_slots(self) -> int:
        """Room to fetch into (or the drain began). With more task runs waiting for a slot
        than there are slots, it waits for room for a quarter of the prefetch: a backlog is
        then claimed in batches, not a few task runs each time some finished (each claim and
        consume costs the same whatever its size)."""
        while not self._draining.is_set():
            capacity, limit = self._capacity(), self._slots.limit
            free = capacity - len(self._active)
            waiting = len(self._active) - self._slots.used
            if free > 0 and (waiting <= limit or free >= (capacity - limit) // 4):
                return free
            self._room.clear()
            await self._room.wait()
        return 0

    async def _claim_and_start(self, deliveries: Sequence[Delivery]) -> None:
        keys = [(d.task_run_id, d.attempt) for d in deliveries]
        claimed = await through_outages(
            "claim", lambda: self._store.claim(keys, self._config.worker_id, self._clock())
        )
        won = {(tr.id, tr.attempt) for tr in claimed}
        for key, delivery in zip(keys, deliveries, strict=True):
            if key in won and key not in self._unacked:
                self._unacked[key] = delivery
            else:  # a duplicate or stale message: the store said no, nothing to wait for
                self._acks.put_nowait(delivery)
        for task_run in claimed:
            active = _Active(task_run, CancelSignal())
            if (old := self._active.get(task_run.id)) is not None:
                self._abandon(old)  # given back while we held it, and now claimed anew
            self._active[task_run.id] = active
            if self._early_cancels.take((task_run.id, task_run.attempt)):
                self._mark_cancelled(active)
            active.task = asyncio.create_task(self._execute(active), name=f"task:{task_run.id}")

    # -- executing ---------------------------------------------------------------------
    async def _execute(self, active: _Active) -> None:
        async with self._slots:
            active.started, active.since = True, time.monotonic()
            self._granted += 1
            if active.ahead:
                active.ahead = False
                self._started_ahead -= 1
                if self._started_ahead <= self._slots.limit // 2:
                    self._starts.kick()  # the next held ones, before their slots come
            if active.abandoned or (active.held and not await self._start_held(active)):
                self._forget(active)
                self._finish(active)
                return
            await self._execute_in_slot(active)

    async def _start_held(self, active: _Active) -> bool:
        """A heartbeat told the store this task run had not started (so the reaper may give
        it back without spending an attempt): say it starts now, and run it only if the
        store still has it as ours. Task runs getting their slots meanwhile go together."""
        key = (active.task_run.id, active.task_run.attempt)
        if await self._starts.start(key):
            return True
        log.warning("task run %s attempt %d not started: the store gave it back", key[0], key[1])
        return False

    async def _start_batch(self, keys: Sequence[TaskKey]) -> set[TaskKey]:
        # Under the beat's lock, so that a task run's ``held`` always says what the store's
        # last write for it said: the beat that marked them lands first, and a beat cannot
        # mark one again between this start and ``held = False`` below.
        async with self._beat_lock:
            won = set(
                await through_outages(
                    "start", lambda: self._store.start(keys, self._config.worker_id, self._clock())
                )
            )
            for task_run_id, attempt in keys:
                active = self._active.get(task_run_id)
                if active is None or active.task_run.attempt != attempt or active.started:
                    continue  # one with a slot learns its answer from ``HeldStarts``
                if (task_run_id, attempt) not in won:
                    self._abandon(active)  # started ahead too late: the reaper gave it back
                elif active.held:
                    active.held, active.ahead = False, True
                    self._started_ahead += 1
        return won

    def _next_held(self, busy: Collection[TaskKey]) -> list[TaskKey]:
        """The held task runs next in line for a slot (claim order is slot order), to start
        with ``busy``: those expected to get a slot before the next heartbeat (at the rate
        slots were handed out since the last two), at least as many as the slots. A task run
        claimed since the last beat is started already; so is every one after it."""
        until_beat = self._beat_at + self._config.heartbeat_interval - time.monotonic()
        want = max(self._slots.limit, int(self._grant_rate * until_beat))
        found: list[TaskKey] = []
        for active in self._active.values():
            if active.started or active.abandoned or active.ahead:
                continue
            if not active.held:
                break
            key = (active.task_run.id, active.task_run.attempt)
            if key not in busy:
                found.append(key)
                if len(found) >= want:
                    break
        return found

    def _forget(self, active: _Active) -> None:
        """An attempt that ends without an outcome from us: ack its message, drop its hooks."""
        key = (active.task_run.id, active.task_run.attempt)
        self._hooked.forget(active.task_run)
        if (delivery := self._unacked.pop(key, None)) is not None:
            self._acks.put_nowait(delivery)

    async def _execute_in_slot(self, active: _Active) -> None:
        task_run = active.task_run
        started = self._clock()
        sink = TaskLog(
            task_run,
            self._logs.put,
            self._clock,
            self._hooked.tail_for(task_run),
            max_bytes=log_max_bytes(task_run.config),
        )
        try:
            if active.cancel.is_set():  # cancelled or drained while waiting for a slot
                result = RunResult(ok=False, cancelled=True)
            else:
                result = await self._run_one(with_inputs(task_run), sink, active.cancel)
            outcome = self._outcome(active.task_run, result, started)
            elapsed = (outcome.finished_at - started).total_seconds()
            self._avg_duration = 0.9 * self._avg_duration + 0.1 * elapsed
            sink.close()
            if active.abandoned:
                sink.write("system", f"attempt {task_run.attempt}: abandoned: reaped\n")
            elif outcome.error:
                sink.write(
                    "system", f"attempt {task_run.attempt}: {outcome.state}: {outcome.error}\n"
                )
            # Logs first: once a task run reads as finished, its whole output is readable.
            await sink.flushed()
            if active.abandoned:  # the store refuses it anyway: it is someone else's now
                self._forget(active)
            else:
                self._outcomes.put_nowait(outcome)
        except BaseException:
            self._hooked.drop(task_run.id)  # no outcome will come to fire its callbacks
            raise
        finally:
            self._finish(active)

    def _finish(self, active: _Active) -> None:
        # Identity: a task run given back and claimed anew by this pool has a newer entry.
        if self._active.get(active.task_run.id) is active:
            del self._active[active.task_run.id]
        self._room.set()

    async def _run_one(self, task_run: TaskRun, sink: TaskLog, cancel: asyncio.Event) -> RunResult:
        runner = self._runners.get(task_run.kind)
        if runner is None:
            return RunResult(ok=False, error=f"no runner for task kind {task_run.kind!r}")
        try:
            return await runner.run(task_run, sink, cancel)
        except Exception as exc:  # a runner bug must not kill the pool
            log.exception("runner for %s crashed", task_run.id)
            return RunResult(ok=False, error=f"runner crashed: {exc!r}")

    def _outcome(self, task_run: TaskRun, result: RunResult, started: datetime) -> Outcome:
        config = self._config
        return outcome_of(
            task_run, result, started=started, now=self._clock(), rand=self._rand,
            worker_id=config.worker_id, max_result_bytes=config.max_result_bytes,
        )  # fmt: skip

    # -- heartbeats, cancellation and batched writes -----------------------------------
    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self._config.heartbeat_interval)
            if not self._active:
                continue
            await self._beat()

    async def _beat(self) -> None:
        async with self._beat_lock:  # see ``_start_batch``
            keys = [(a.task_run.id, a.task_run.attempt) for a in self._active.values()]
            waiting = [a for a in self._active.values() if not a.started]
            for active in waiting:
                active.held, active.ahead = True, False
            self._started_ahead = 0
            beat_at = time.monotonic()
            self._grant_rate = self._granted / max(beat_at - self._beat_at, 1e-3)
            self._beat_at, self._granted = beat_at, 0
            held = [(a.task_run.id, a.task_run.attempt) for a in waiting]
            try:
                beat = await self._store.heartbeat(
                    keys, self._config.worker_id, self._clock(), held=held
                )
            except StoreUnavailable:  # the next beat tries again; tasks keep running
                return
        for task_run_id in beat.cancelled:
            if (cancelled := self._active.get(task_run_id)) is not None:
                self._mark_cancelled(cancelled)
        for task_run_id, attempt in beat.abandoned:
            lost = self._active.get(task_run_id)
            if lost is not None and lost.task_run.attempt == attempt:
                self._abandon(lost)

    def _abandon(self, active: _Active) -> None:
        """The reaper failed or re-queued this attempt (we were presumed lost): stop it (the
        runner kills its process tree or child process) and write no outcome."""
        if active.abandoned:
            return
        active.abandoned = True
        active.cancel.set()
        log.warning(
            "task run %s attempt %d abandoned: the store no longer has it as ours (reaped); %s",
            active.task_run.id,
            active.task_run.attempt,
            "stopping it" if active.started else "not starting it",
        )

    async def _cancel_loop(self, cancels: CancelSignals) -> None:
        async for keys in cancels.listen(self._watching):
            for task_run_id, attempt in keys:
                active = self._active.get(task_run_id)
                if active is not None and active.task_run.attempt == attempt:
                    self._mark_cancelled(active)
                else:
                    self._early_cancels.remember((task_run_id, attempt))

    def _watching(self) -> list[TaskKey]:
        return [(a.task_run.id, a.task_run.attempt) for a in self._active.values()]

    @staticmethod
    def _mark_cancelled(active: _Active) -> None:
        active.task_run = replace(active.task_run, cancel_requested=True)
        active.cancel.set()

    async def _write_logs(self, chunks: Sequence[LogChunk]) -> None:
        await through_outages("logs", lambda: self._store.append_logs(chunks))

    async def _write_outcomes(self, outcomes: Sequence[Outcome]) -> None:
        done = await through_outages("complete", lambda: self._store.complete(outcomes))
        if done.queued:  # downstream tasks made ready: straight to the workers
            await self._broker.publish(
                [Delivery(tr.id, tr.attempt, tr.queue, tr.priority) for tr in done.queued]
            )
        self._on_complete(outcomes, done)
        for outcome in outcomes:
            delivery = self._unacked.pop((outcome.task_run_id, outcome.attempt), None)
            if delivery is not None:
                self._acks.put_nowait(delivery)
        self._hooked.fire(outcomes, done.applied)
