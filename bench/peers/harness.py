"""A peer as a :class:`~peers.contender.Contender`: its own venv, its worker processes started
as a user would, and a producer process (in the same venv) per workload.

Timings come from what the processes recorded, never from the harness's own clock: enqueue
times and due instants from the producer, job starts from the no-op task's record file.
"""

from __future__ import annotations

import json
import os
import shlex
import string
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peers.contender import Info, Latency, Services, Throughput, latency
from peers.cost import Snapshot, per_job, scaled
from peers.infra import Proc, ensure_venv, pg_database, venv_packages
from peers.records import Records, first_starts

PEERSIDE = Path(__file__).resolve().parent / "peerside"
WARM_JOBS = 20
IDLE_S = float(os.environ.get("PEERBENCH_IDLE_S", "5"))  # idle cost measured before W2


@dataclass(frozen=True)
class PeerSpec:
    Commands = Callable[[Path, int], list[list[str]]]  # (venv bin dir, workers) -> processes

    name: str  # the contender's name (a variant: "<peer>-<what differs>")
    peer: str  # peerside/peer_<peer>.py holds its app and client; also the venv's name
    package: str  # the distribution whose version names the peer
    pins: tuple[str, ...]  # pip requirements, all pinned
    commands: Commands
    config: str  # why these settings
    notes: str  # semantics to keep in mind when reading the numbers
    needs_pg: bool = False  # a fresh database bench_<peer>_<pid> (see Services.pg_env)
    default: bool = True  # run without being named in --peers
    env: tuple[tuple[str, str], ...] = ()  # extra variables for every process it starts
    # Arguments and env values may use ${PEERBENCH_REDIS_URL}, ${PEERBENCH_PG_URL}, ...


class PeerContender:
    def __init__(self, spec: PeerSpec, services: Services) -> None:
        self.spec = spec
        self.services = services
        self.dir = services.out_dir / spec.name
        self.records = Records(self._mkdir() / "records.bin")
        self.workers: list[Proc] = []
        self.stack = ExitStack()
        self.env: dict[str, str] = {}
        self.python = Path()

    def _mkdir(self) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir

    def start(self) -> Info:
        spec, svc = self.spec, self.services
        venv = ensure_venv(svc.venv_root, spec.peer, spec.pins, self.dir / "pip.log")
        self.python = venv / "bin" / "python"
        self.env = self._env(venv)
        if spec.needs_pg:
            db = f"bench_{spec.peer}_{os.getpid()}"
            self.stack.enter_context(pg_database(svc.pg_host, svc.pg_port, svc.pg_user, db))
            self.env |= svc.pg_env(db)
        self.env |= {k: self._expand(v) for k, v in spec.env}
        self._produce("setup")
        commands = [[self._expand(a) for a in c] for c in spec.commands(venv / "bin", svc.workers)]
        for k, cmd in enumerate(commands):
            log = self.dir / f"worker-{k}.log"
            proc = svc.procs.spawn(f"{spec.name}-{k}", cmd, log=log, env=self.env, cwd=PEERSIDE)
            self.workers.append(proc)
        self._warm()
        packages = venv_packages(venv)
        shown = " ; ".join(shlex.join([Path(c[0]).name, *c[1:]]) for c in commands)
        return Info(
            name=spec.name,
            version=f"{spec.package} {packages.get(spec.package, '?')}",
            config=f"{shown} ({spec.config})",
            notes=spec.notes,
            packages=packages,
        )

    def _expand(self, template: str) -> str:
        return string.Template(template).safe_substitute(self.env)

    def _env(self, venv: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(PEERSIDE)
        env["PEERBENCH_RECORD"] = str(self.records.path)
        env["PEERBENCH_REDIS_URL"] = self.services.redis_url
        return env

    def _produce(self, *args: object) -> dict[str, Any]:
        cmd = [str(self.python), str(PEERSIDE / "peer_producer.py"), self.spec.peer]
        cmd += [str(a) for a in args]
        done = subprocess.run(
            cmd, env=self.env, cwd=PEERSIDE, capture_output=True, text=True, check=False
        )
        with (self.dir / "producer.log").open("a") as log:
            log.write(f"$ {shlex.join(cmd[1:])}\n{done.stderr}")
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"producer {args[0]} failed: {last} (see {self.dir}/producer.log)")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def _alive(self) -> None:
        for proc in self.workers:
            if proc.popen.poll() is not None:
                raise RuntimeError(
                    f"{proc.name} exited with {proc.popen.returncode}; see {self.dir}/worker-*.log"
                )

    def _warm(self) -> None:
        mark = self.records.count()
        self._produce("warm", WARM_JOBS)
        got = self.records.wait(mark, WARM_JOBS, timeout=120, stall=120, check=self._alive)
        if got < WARM_JOBS:
            raise RuntimeError(f"{self.spec.name}: only {got}/{WARM_JOBS} warm-up jobs ran")

    def w1(self, n: int) -> Throughput:
        mark = self.records.count()
        out = self._produce("w1", n)
        self.records.wait(mark, n, timeout=max(300.0, n / 20), stall=60, check=self._alive)
        starts, dups = first_starts(self.records.read(mark), "w1")
        first, submitted = out["first_submit_ns"], out["last_submit_ns"]
        total_s = (max(starts.values(), default=first) - first) / 1e9
        submit_s = (submitted - first) / 1e9
        return Throughput(
            jobs=n,
            submit_s=round(submit_s, 3),
            total_s=round(total_s, 3),
            jobs_per_s=round(n / total_s, 1) if total_s > 0 else 0.0,
            submit_jobs_per_s=round(n / submit_s, 1),
            bulk=out["bulk"],
            lost=n - len(starts),
            duplicates=dups,
        )

    def _roles(self) -> dict[str, list[int]]:
        """Process kinds and their root pids, for the cost of a workload (descendants count)."""
        return {"workers": [proc.popen.pid for proc in self.workers]}

    def _counters(self) -> dict[str, float]:
        """Other cumulative counters to report per job (tickwork: PostgreSQL transactions)."""
        return {}

    def _snapshot(self) -> Snapshot:
        port = int(self.services.redis_url.rsplit(":", 1)[1].split("/")[0])
        return Snapshot.take(self._roles(), port, self._counters())

    def w2(self, rate: float, seconds: float) -> Latency:
        time.sleep(1.0)  # idle workers, as a steady trickle would find them
        idle = self._snapshot()
        time.sleep(IDLE_S)  # what doing nothing costs: heartbeats, polls, timers
        before = self._snapshot()
        idle_cost = per_job(idle, before, 1)
        mark = self.records.count()
        out = self._produce("w2", rate, seconds)
        enqueued: list[int] = out["enqueue_ns"]
        n = len(enqueued)
        self.records.wait(mark, n, timeout=120, stall=60, check=self._alive)
        cost = per_job(before, self._snapshot(), max(n, 1))  # the producer's own cost is not in
        starts, dups = first_starts(self.records.read(mark), "w2")
        # Per job: submitted, submit call returned, started (a subclass may dig).
        self.w2_times = (enqueued, out.get("returned_ns", enqueued), starts)
        values = [(ns - enqueued[i]) / 1e6 for i, ns in starts.items()]
        # The producer is paced, each of its lanes sequential (``--w2-lanes``): a call slower
        # than lanes/rate lowers the rate actually offered (the latency of each job still
        # counts from its own submit).
        offered = round(n / out["submit_s"], 1) if out["submit_s"] > 0 else 0.0
        return latency(
            values, lost=n - len(starts), duplicates=dups, rate=rate, offered_per_s=offered,
            lanes=out.get("lanes", 1),
            cost=cost, idle_per_s=scaled(idle_cost, 1 / IDLE_S) | {"seconds": IDLE_S},
        )  # fmt: skip

    def w3(self, n: int) -> Latency:
        mark = self.records.count()
        out = self._produce("w3", n, os.getpid())
        due: list[int] = out["due_ns"]
        wait_s = (due[-1] - time.time_ns()) / 1e9 + 30
        self.records.wait(mark, n, timeout=wait_s, stall=wait_s, check=self._alive)
        starts, dups = first_starts(self.records.read(mark), "w3")
        values = [(ns - due[i]) / 1e6 for i, ns in starts.items()]
        late = out["submitted_after_due"]
        if late:
            print(f"  warning: {self.spec.name} W3: {late} jobs submitted after their due instant")
        return latency(
            values,
            lost=n - len(starts),
            duplicates=dups,
            submitted_after_due=late,
            submit_s=round((out["enqueued_ns"] - out["started_ns"]) / 1e9, 3),
        )

    def stop(self) -> None:
        try:
            for proc in self.workers:
                self.services.procs.stop(proc)
            self.workers.clear()
        finally:
            self.stack.close()
