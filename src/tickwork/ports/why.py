"""The ``WhyStore`` port: the facts "why isn't it running?" explains (``core.why``)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from tickwork.core.why import WhyFacts


class WhyStore(Protocol):
    async def run_facts(self, run_id: str, workers_seen_since: datetime) -> WhyFacts | None:
        """What the gates of this run look at, in one snapshot; None for an unknown run.
        ``leader`` is left unknown: the lease may live outside the database."""

    async def job_facts(
        self, name: str, workers_seen_since: datetime
    ) -> tuple[WhyFacts, list[WhyFacts]] | None:
        """The live job's facts, and those of its oldest unfinished runs (a few, oldest
        first); None for an unknown job."""
