""" "Why isn't it running?": the facts from the store, the reasons from the core."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from tickwork.core.errors import NotFound
from tickwork.core.model import RunState
from tickwork.core.why import Reason, WhyFacts, explain_job, explain_run
from tickwork.ports import Store

#: A worker silent this long is not counted as serving its queues (as ``tickwork status``).
WORKER_SEEN = timedelta(seconds=15)

#: Whether a scheduler holds the lease now (distributed mode); embedded mode has none: its
#: one scheduler and its workers live in the process that answers.
LeaderProbe = Callable[[], Awaitable[bool]]


class WhyService:
    def __init__(
        self, store: Store, clock: Callable[[], datetime], leader: LeaderProbe | None = None
    ) -> None:
        self._store = store
        self._clock = clock
        self._leader = leader

    async def run(self, run_id: str) -> list[Reason]:
        """Why a run is not running (or how it ended), in plain sentences."""
        now = self._clock()
        facts = await self._store.run_facts(run_id, now - WORKER_SEEN)
        if facts is None:
            raise NotFound("run", run_id)
        return explain_run(await self._with_canceller(await self._with_topology(facts)), now)

    async def job(self, name: str) -> list[Reason]:
        """Why a job is not running now: its state, then its oldest unfinished run's reasons."""
        now = self._clock()
        found = await self._store.job_facts(name, now - WORKER_SEEN)
        if found is None:
            raise NotFound("job", name)
        facts, waiting = found
        facts = await self._with_topology(facts)
        waiting = [await self._with_topology(f) for f in waiting]
        return explain_job(facts, now, waiting)

    async def _with_canceller(self, facts: WhyFacts) -> WhyFacts:
        """A cancelled run's canceller: the newest cancel of it in the audit log (the API's
        target is ``run_id:ID``, the dashboard's ``run:ID``)."""
        run = facts.run
        if run is None or run.state is not RunState.CANCELLED:
            return facts
        entry = await self._store.last_audit("cancel_run", [f"run_id:{run.id}", f"run:{run.id}"])
        return facts if entry is None else dataclasses.replace(facts, cancelled_by=entry.token_name)

    async def _with_topology(self, facts: WhyFacts) -> WhyFacts:
        if self._leader is None:  # embedded: the scheduler and the workers are here
            return dataclasses.replace(facts, workers=None, leader=None)
        return dataclasses.replace(facts, leader=await self._leader())
