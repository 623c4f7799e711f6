"""tickwork's distributed mode as a contender: the peers' harness and ledger, plus its own.

Same harness as the peers (``harness.PeerContender``): a venv ``bench/.venvs/tickwork`` with the
working tree installed (editable), the run's Redis, a fresh PostgreSQL database, processes
started with tickwork's CLI as an operator would (``tickwork db upgrade`` first, then
``tickwork scheduler``, ``workers`` x ``tickwork worker``, ``tickwork api``), and jobs submitted
through the public SDK/API by the producer (``peerside/peer_tickwork.py``).

**Two ledgers.** The table's numbers come from the same ledger as every peer's: the task body
appends its start to the shared record file, and submit times and due instants come from the
producer. tickwork also records every run in PostgreSQL, and a no-op's start is not the end of
its job there: the outcome is written afterwards. So each workload also reads tickwork's own
records (``task_runs.started_at`` / ``finished_at``, ``runs.created_at``, ``logical_date``) and
reports, under ``extra``: how many runs ended ``success`` (all of them must: nothing is
durable otherwise), W1 jobs/s until the last outcome was committed, and the server-side W2/W3
delays. See bench/README.md, "tickwork".
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from peers.contender import Contender, Latency, Services, Throughput, register
from peers.harness import PeerContender, PeerSpec
from peers.infra import free_port, psql
from peers.records import first_starts

ROOT = Path(__file__).resolve().parents[2]  # the repository: installed editable
CONCURRENCY = 8  # tasks per worker process (see bench/README.md for the choice)
ENV = (
    ("TICKWORK_DATABASE_URL",
     "postgresql+psycopg://${PEERBENCH_PG_USER}@${PEERBENCH_PG_HOST}:${PEERBENCH_PG_PORT}"
     "/${PEERBENCH_PG_DB}"),
    ("TICKWORK_REDIS_URL", "${PEERBENCH_REDIS_URL}"),
)  # fmt: skip


def commands(concurrency: int) -> PeerSpec.Commands:
    def cmds(bin_dir: Path, workers: int) -> list[list[str]]:
        tw = str(bin_dir / "tickwork")
        worker = [tw, "worker", "--queues", "default", "--concurrency", str(concurrency)]
        return [[tw, "scheduler"], *([list(worker)] * workers), [tw, "api"]]

    return cmds


NOTES = (
    "PostgreSQL is the record (every run and outcome committed), Redis Streams carry task-run "
    "keys; claim and outcome are batched transactions; `at` work is handed to Redis up to 5 min "
    "ahead and delivered by the workers' own timer"
)


def spec(name: str, task: str, inflight: int, *, default: bool) -> PeerSpec:
    extra = (("PEERBENCH_TW_TASK", task), ("PEERBENCH_TW_INFLIGHT", str(inflight)))
    return PeerSpec(
        name=name,
        peer="tickwork",
        package="tickwork",
        pins=("-e", str(ROOT)),
        commands=commands(CONCURRENCY),
        config=f"1 scheduler, 2 workers x concurrency {CONCURRENCY}, 1 API; task {task}",
        notes=NOTES,
        needs_pg=True,
        default=default,
        env=(*ENV, *extra),
    )


class TickworkContender(PeerContender):
    """The peers' harness, plus a free API port, a data dir for the admin token, and the
    durable ledger read from tickwork's own PostgreSQL tables after each workload."""

    def _env(self, venv: Path) -> dict[str, str]:
        env = super()._env(venv)
        env["TICKWORK_PORT"] = str(free_port())
        env["TICKWORK_DATA_DIR"] = str(self.dir / "data")
        return env

    def _sql(self, sql: str) -> list[list[str]]:
        svc = self.services
        out = psql(svc.pg_host, svc.pg_port, svc.pg_user, sql, self.env["PEERBENCH_PG_DB"])
        return [line.split("|") for line in out.splitlines() if line]

    def _succeeded(self, tag: str, n: int, timeout: float = 60.0) -> tuple[int, int]:
        """Wait until ``n`` runs of workload ``tag`` read ``success`` in PostgreSQL; returns
        how many did and when that was seen (``time.time_ns()``, polled every ~20 ms)."""
        deadline = time.monotonic() + timeout
        sql = f"SELECT count(*) FROM runs WHERE job_name LIKE '{tag}-%' AND state = 'success'"
        while True:
            done = int(self._sql(sql)[0][0])
            if done >= n or time.monotonic() > deadline:
                return done, time.time_ns()
            time.sleep(0.01)

    def _delays(self, tag: str, since: str) -> dict[str, Any]:
        """p50/p95/p99/max of ``started_at - <since>`` in ms, from tickwork's tables."""
        ms = f"extract(epoch FROM t.started_at - {since}) * 1000"
        qs = "ARRAY[0.5, 0.95, 0.99]"
        sql = (
            f"SELECT percentile_cont({qs}) WITHIN GROUP (ORDER BY {ms}), max({ms}), count(*) "
            f"FROM task_runs t JOIN runs r ON r.id = t.run_id WHERE t.job_name LIKE '{tag}-%'"
        )
        pcts, top, count = self._sql(sql)[0]
        p50, p95, p99 = (round(float(v), 2) for v in pcts.strip("{}").split(","))
        return {"p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "max_ms": round(float(top), 2),
                "n": int(count)}  # fmt: skip

    def _cpu(self) -> dict[str, float]:
        """CPU seconds so far (utime + stime from /proc) of each tickwork process, and of
        this database's PostgreSQL backends together (the pooled connections live on)."""
        roles = ["scheduler", *(f"worker{i}" for i in range(1, len(self.workers) - 1)), "api"]
        pids = {role: proc.popen.pid for role, proc in zip(roles, self.workers, strict=True)}
        db = self.env["PEERBENCH_PG_DB"]
        sql = f"SELECT pid FROM pg_stat_activity WHERE datname = '{db}' AND pid <> pg_backend_pid()"
        cpu = {role: _proc_cpu(pid) for role, pid in pids.items()}
        cpu["postgres"] = sum(_proc_cpu(int(row[0])) for row in self._sql(sql))
        return cpu

    def _cpu_per_job(self, before: dict[str, float], n: int) -> dict[str, float]:
        after = self._cpu()
        per_job = {k: round((after[k] - before.get(k, 0.0)) / n * 1e6, 1) for k in after}
        per_job["workers"] = round(sum(v for k, v in per_job.items() if k.startswith("worker")), 1)
        return per_job

    def w1(self, n: int) -> Throughput:
        mark = self.records.count()
        cpu = self._cpu()
        result = super().w1(n)
        starts, _ = first_starts(self.records.read(mark), "w1")
        first_ns = max(starts.values()) - round(result.total_s * 1e9)
        ok, seen_ns = self._succeeded("w1", n)
        durable_s = (seen_ns - first_ns) / 1e9
        extra = {
            "pg_success": ok,
            "pg_durable_s": round(durable_s, 3),
            "pg_durable_jobs_per_s": round(n / durable_s, 1),
            "pg_start_after_created_ms": self._delays("w1", "r.created_at"),
            "cpu_us_per_job": self._cpu_per_job(cpu, n),
        }
        return dataclasses.replace(result, extra=result.extra | extra)

    def w2(self, rate: float, seconds: float) -> Latency:
        cpu = self._cpu()
        result = super().w2(rate, seconds)
        extra = {
            "pg_success": self._succeeded("w2", result.n)[0],
            "cpu_us_per_job": self._cpu_per_job(cpu, result.n),
            "pg_start_after_created_ms": self._delays("w2", "r.created_at"),
        }
        return dataclasses.replace(result, extra=result.extra | extra)

    def w3(self, n: int) -> Latency:
        result = super().w3(n)
        extra = {
            "pg_success": self._succeeded("w3", n)[0],
            "pg_start_after_due_ms": self._delays("w3", "t.logical_date"),
        }
        return dataclasses.replace(result, extra=result.extra | extra)


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # ended meanwhile
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _factory(peer_spec: PeerSpec) -> Any:
    def make(services: Services) -> Contender:
        return TickworkContender(peer_spec, services)

    return make


SPECS = [
    spec("tickwork", "anoop", 2, default=True),
    spec("tickwork-sync", "noop", 2, default=False),
    spec("tickwork-1req", "anoop", 1, default=False),
]
for _spec in SPECS:
    register(_spec.name, _factory(_spec), default=_spec.default)
