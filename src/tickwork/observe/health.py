"""Liveness and readiness, the same way for every process kind.

``/livez``: the process's loops are alive (a supervised task that ended, or a scheduler pass
older than ``STALLED_AFTER`` while leading, is not). ``/readyz``: the process can do its job
now (its database, and in distributed mode Redis, answer). Both answer 200 with a JSON body,
or 503 with ``{"status": ..., "reason": ...}``: a probe goes by the code, unlike health
checks that say "unhealthy" with a 200.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tickwork.observe.metrics import VERSION

#: A leader whose scheduler loop has not finished a pass for this long is stalled.
STALLED_AFTER = 60.0
#: Seconds a readiness dependency gets to answer.
CHECK_TIMEOUT = 2.0

Check = Callable[[], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    body: dict[str, Any]

    @property
    def status_code(self) -> int:
        return 200 if self.ok else 503


@dataclass
class Health:
    """What a process's probes look at.

    ``loops``: the process's long-running tasks (any that ended means not alive).
    ``dependencies``: name -> an awaitable check that raises when the dependency is down.
    ``describe``: extra fields for the answer (a scheduler's ``role``, ``epoch``).
    ``last_pass``: monotonic time of the scheduler's last pass, when it leads (None: no check).
    """

    kind: str
    loops: list[asyncio.Task[Any]] = field(default_factory=list)
    dependencies: Mapping[str, Check] = field(default_factory=dict)
    describe: Callable[[], dict[str, Any]] = dict
    last_pass: Callable[[], float | None] = lambda: None
    monotonic: Callable[[], float] = time.monotonic

    def live(self) -> Verdict:
        for task in self.loops:
            if task.done():
                return self._no("dead", f"{task.get_name()} stopped")
        last = self.last_pass()
        if last is not None and self.monotonic() - last > STALLED_AFTER:
            age = self.monotonic() - last
            return self._no("stalled", f"no scheduler pass for {age:.0f} s while leading")
        return Verdict(True, self._body("alive"))

    async def ready(self) -> Verdict:
        for name, check in self.dependencies.items():
            try:
                await asyncio.wait_for(check(), CHECK_TIMEOUT)
            except Exception as exc:  # any failure: the probe says why, it does not crash
                return self._no("unready", f"{name}: {exc or type(exc).__name__}")
        return Verdict(True, self._body("ready"))

    def _no(self, status: str, reason: str) -> Verdict:
        return Verdict(False, self._body(status) | {"reason": reason})

    def _body(self, status: str) -> dict[str, Any]:
        return {"status": status, "kind": self.kind, "version": VERSION} | self.describe()
