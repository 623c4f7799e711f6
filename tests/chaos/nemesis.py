"""The nemesis of the chaos suite: faults injected into a running cluster, one at a time.

Every fault is one of what production sees: a worker or the leader killed (SIGKILL) or frozen
(SIGSTOP, then SIGCONT after longer than the heartbeat timeout or the lease TTL), Redis
flushed (FLUSHALL) or restarted empty, PostgreSQL restarted. Killed processes are started
again, as a supervisor would. What was done, to whom and when is kept for the checker:
executions of killed or frozen workers may be repeated (their attempts were reaped), and a
leader's death must be followed by a takeover within TTL + 5 s.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.cluster import Cluster, Proc, holder_pid

FAULTS = (
    "kill_worker",
    "stop_worker",
    "kill_leader",
    "stop_leader",
    "flush_redis",
    "restart_redis",
    "restart_postgres",
)


@dataclass
class Nemesis:
    cluster: Cluster
    every: float = 4.0  # seconds between two faults
    seed: int = 1
    faults: tuple[str, ...] = FAULTS
    log: list[dict[str, Any]] = field(default_factory=list)
    suspects: set[int] = field(default_factory=set)  # worker pids killed or frozen
    failovers: list[float] = field(default_factory=list)  # seconds, leader death -> new lease
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    errors: list[str] = field(default_factory=list)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)

    def _run(self) -> None:
        rand = random.Random(self.seed)
        i = 0
        while not self._stop.wait(self.every):
            fault = (
                self.faults[i % len(self.faults)]
                if i < len(self.faults)
                else rand.choice(self.faults)
            )
            i += 1
            started = time.time()
            try:
                detail = getattr(self, fault)(rand)
            except Exception as exc:  # a fault that could not be injected is a test failure
                self.errors.append(f"{fault}: {exc!r}")
                detail = {"error": repr(exc)}
            self.log.append({"fault": fault, "at": started, **detail})

    # -- faults ---------------------------------------------------------------------------

    def kill_worker(self, rand: random.Random) -> dict[str, Any]:
        victim = rand.choice(self.cluster.of_kind("worker"))
        self.suspects.add(victim.pid)
        victim.kill9()
        victim.start()
        return {"pid": victim.pid}

    def stop_worker(self, rand: random.Random) -> dict[str, Any]:
        victim = rand.choice(self.cluster.of_kind("worker"))
        self.suspects.add(victim.pid)
        victim.send(signal.SIGSTOP)
        time.sleep(self.cluster.timings.heartbeat_timeout + 3)  # reaped meanwhile
        victim.send(signal.SIGCONT)
        return {"pid": victim.pid}

    def kill_leader(self, rand: random.Random) -> dict[str, Any]:
        leader, epoch = self._leader()
        died = time.monotonic()
        leader.kill9()
        took = self._new_lease_after(epoch, died)
        leader.start()
        return {"pid": leader.pid, "epoch": epoch, "failover_s": took}

    def stop_leader(self, rand: random.Random) -> dict[str, Any]:
        leader, epoch = self._leader()
        frozen = time.monotonic()
        leader.send(signal.SIGSTOP)
        took = self._new_lease_after(epoch, frozen)
        leader.send(signal.SIGCONT)
        return {"pid": leader.pid, "epoch": epoch, "failover_s": took}

    def flush_redis(self, rand: random.Random) -> dict[str, Any]:
        self.cluster.redis.flushall()
        return {}

    def restart_redis(self, rand: random.Random) -> dict[str, Any]:
        self.cluster.redis.stop()
        self.cluster.redis.start()
        return {}

    def restart_postgres(self, rand: random.Random) -> dict[str, Any]:
        self.cluster.pg.stop_server("immediate")
        self.cluster.pg.start_server()
        time.sleep(self.cluster.timings.heartbeat_timeout)  # let everyone reconnect
        return {}

    # -- helpers ----------------------------------------------------------------------------

    def _leader(self) -> tuple[Proc, int]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lease = self._lease()
            if lease is not None:
                holder, epoch = lease
                return self.cluster.by_pid(holder_pid(holder)), epoch
            time.sleep(0.2)
        raise AssertionError("no leader for 30 s")

    def _lease(self) -> tuple[str, int] | None:
        try:
            found = self.cluster.lease()
        except Exception:
            return None
        return None if found is None else (found[0], found[1])

    def _new_lease_after(self, epoch: int, since: float) -> float:
        deadline = since + 60
        while time.monotonic() < deadline:
            lease = self._lease()
            if lease is not None and lease[1] > epoch:
                took = time.monotonic() - since
                self.failovers.append(took)
                return took
            time.sleep(0.1)
        raise AssertionError(f"no new leader within 60 s after epoch {epoch}")
