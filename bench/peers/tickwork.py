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

import asyncio
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


RABBITMQ = (
    ("TICKWORK_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/"),
    ("TICKWORK_REDIS_PREFIX", "${PEERBENCH_PG_DB}"),  # queue names of this run's own
)
RABBITMQ_NOTES = (
    "as tickwork, with the local RabbitMQ as broker (quorum queues per lane, publisher "
    "confirms, manual acks after the outcome is committed) instead of Redis"
)


def spec(
    name: str,
    task: str,
    inflight: int,
    *,
    default: bool,
    submit: str = "enqueue",
    broker: tuple[tuple[str, str], ...] = (),
) -> PeerSpec:
    extra = (
        ("PEERBENCH_TW_TASK", task),
        ("PEERBENCH_TW_INFLIGHT", str(inflight)),
        ("PEERBENCH_TW_SUBMIT", submit),
        *broker,
    )
    return PeerSpec(
        name=name,
        peer="tickwork",
        package="tickwork",
        pins=("-e", str(ROOT)),
        commands=commands(CONCURRENCY),
        config=(
            f"1 scheduler, 2 workers x concurrency {CONCURRENCY}, 1 API; task {task}; "
            f"submit: {submit}"
        ),
        notes=RABBITMQ_NOTES if broker else NOTES,
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
        if src := os.environ.get("PEERBENCH_TW_SRC"):  # another checkout's src/ (baselines)
            env["PYTHONPATH"] = f"{src}{os.pathsep}{env['PYTHONPATH']}"
        if os.environ.get("PEERBENCH_TW_TRACE"):  # W2's hops stamped (tw_trace/sitecustomize)
            trace = self.dir / "trace"
            trace.mkdir(parents=True, exist_ok=True)
            env["PEERBENCH_TW_TRACE"] = str(trace)
            probes = Path(__file__).parent / "tw_trace"
            env["PYTHONPATH"] = f"{probes}{os.pathsep}{env['PYTHONPATH']}"
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
        """CPU seconds (user + system) so far of each tickwork process, by role, and of the
        PostgreSQL backends serving the contender's database (by pid)."""
        names = ["scheduler", *(f"worker-{k}" for k in range(len(self.workers) - 2)), "api"]
        procs = zip(names, self.workers, strict=True)
        out = {name: _proc_cpu(proc.popen.pid) for name, proc in procs}
        db = self.env["PEERBENCH_PG_DB"]
        pids = self._sql(f"SELECT pid, backend_type FROM pg_stat_activity WHERE datname = '{db}'")
        kind = {"client backend": "client", "autovacuum worker": "autovacuum"}
        out |= {f"pg-{row[0]}-{kind.get(row[1], 'other')}": _proc_cpu(int(row[0])) for row in pids}
        return out

    def _roles(self) -> dict[str, list[int]]:
        """scheduler, workers (with their python task processes), API, PostgreSQL backends."""
        pids = [proc.popen.pid for proc in self.workers]
        db = self.env["PEERBENCH_PG_DB"]
        backends = self._sql(f"SELECT pid FROM pg_stat_activity WHERE datname = '{db}'")
        return {"scheduler": pids[:1], "worker": pids[1:-1], "api": pids[-1:],
                "pg": [int(row[0]) for row in backends]}  # fmt: skip

    def _counters(self) -> dict[str, float]:
        db = self.env["PEERBENCH_PG_DB"]
        sql = f"SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '{db}'"
        return {"pg_transactions": float(self._sql(sql)[0][0])}

    def _cpu_per_job(self, before: dict[str, float], n: int) -> dict[str, float]:
        """CPU µs per job of each role since ``before`` (workers and PostgreSQL summed)."""
        after = self._cpu()
        spent: dict[str, float] = {}
        for name, seconds in after.items():
            role = name.split("-")[0]
            spent[role] = spent.get(role, 0.0) + seconds - before.get(name, 0.0)
        spent["total"] = sum(spent.values())
        return {role: round(s * 1e6 / n, 1) for role, s in spent.items()}

    def w1(self, n: int) -> Throughput:
        mark = self.records.count()
        cpu = self._cpu()
        result = super().w1(n)
        starts, _ = first_starts(self.records.read(mark), "w1")
        first_ns = max(starts.values()) - round(result.total_s * 1e9)
        ok, seen_ns = self._succeeded("w1", n)
        cpu_us = self._cpu_per_job(cpu, n)
        durable_s = (seen_ns - first_ns) / 1e9
        extra = {
            "pg_success": ok,
            "pg_durable_s": round(durable_s, 3),
            "pg_durable_jobs_per_s": round(n / durable_s, 1),
            "pg_start_after_created_ms": self._delays("w1", "r.created_at"),
            "cpu_us_per_job": cpu_us,
        }
        return dataclasses.replace(result, extra=result.extra | extra)

    def w2(self, rate: float, seconds: float) -> Latency:
        cpu = self._cpu()
        result = super().w2(rate, seconds)
        extra = {
            "pg_success": self._succeeded("w2", result.n)[0],
            "cpu_us_per_job": self._cpu_per_job(cpu, result.n),
            "pg_start_after_created_ms": self._delays("w2", "r.created_at"),
            "path_ms": self._path("w2"),
        }
        if trace := self.env.get("PEERBENCH_TW_TRACE"):
            time.sleep(1.0)  # the probes flush every 0.5 s
            roles = {pid: role for role, pids in self._roles().items() for pid in pids}
            rows = self._sql(_TRACE_SQL)
            extra["trace_ms"] = hops(Path(trace), rows, self.w2_times[2], roles)
        return dataclasses.replace(result, extra=result.extra | extra)

    def _path(self, tag: str) -> dict[str, Any]:
        """Where each W2 job's time went, from the producer's submit to the task's first line:
        ``api`` (submit → the API stamps ``runs.created_at``), ``to_claim`` (→ the worker's
        claim is stamped ``started_at``: the insert, the publish, the delivery and the
        worker's wake-up), ``to_task`` (→ the task body's record: the claim's round trip,
        a slot, the task process); p50 / p99 of each, and their means over the slowest 2 %
        of jobs (what makes the tail). Beside them, ``created_to_returned``: from the stamp
        to the producer's call returning (the insert's commit, the publish, the answer),
        which overlaps ``to_claim``. One machine, one clock."""
        enqueued, returned, starts = self.w2_times
        job = "(t.config::json->'kwargs'->>'i')::int"
        rows = self._sql(
            f"SELECT {job}, extract(epoch FROM r.created_at), extract(epoch FROM t.started_at) "
            f"FROM task_runs t JOIN runs r ON r.id = t.run_id WHERE t.job_name = '{tag}-jobs'"
        )
        parts: list[tuple[float, float, float, float]] = []
        for number, created, started in rows:
            if (k := int(number)) in starts:
                sub, back, rec = enqueued[k] / 1e6, returned[k] / 1e6, starts[k] / 1e6
                c, s = float(created) * 1e3, float(started) * 1e3
                parts.append((c - sub, s - c, rec - s, back - c))
        if not parts:
            return {}
        parts.sort(key=lambda p: sum(p[:3]))
        tail = parts[-max(len(parts) // 50, 1) :]
        out: dict[str, Any] = {}
        for at, name in enumerate(("api", "to_claim", "to_task", "created_to_returned")):
            values = sorted(p[at] for p in parts)
            out[name] = {
                "p50": round(values[len(values) // 2], 2),
                "p99": round(values[min(len(values) - 1, int(len(values) * 0.99))], 2),
                "slowest_2pct_mean": round(sum(p[at] for p in tail) / len(tail), 2),
            }
        return out

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if url := self.env.get("TICKWORK_BROKER_URL"):
                asyncio.run(_delete_rabbitmq_queues(url, self.env["TICKWORK_REDIS_PREFIX"]))

    def w3(self, n: int) -> Latency:
        result = super().w3(n)
        extra = {
            "pg_success": self._succeeded("w3", n)[0],
            "pg_start_after_due_ms": self._delays("w3", "t.logical_date"),
        }
        return dataclasses.replace(result, extra=result.extra | extra)


_TRACE_SQL = (
    "SELECT t.id, (t.config::json->'kwargs'->>'i')::int, extract(epoch FROM r.created_at), "
    "extract(epoch FROM t.started_at) FROM task_runs t JOIN runs r ON r.id = t.run_id "
    "WHERE t.job_name = 'w2-jobs'"
)
#: (name, from event, to event) of ``hops``; ``created`` / ``started`` / ``task`` are the
#: records' stamps (``runs.created_at``, ``task_runs.started_at``, the task body's first line).
HOPS = (
    ("created->write (API, waiting for the group write in flight)", "created", "write"),
    ("write->stored (insert, commit)", "write", "stored"),
    ("created->stored", "created", "stored"),
    ("stored->pub (API hop)", "stored", "pub"),
    ("pub->pubbed (XADD round trip)", "pub", "pubbed"),
    ("pub->readcb (delivery to a blocked read)", "pub", "readcb"),
    ("readcb->read (worker loop)", "readcb", "read"),
    ("pub->consumed (delivery, any way)", "pub", "consumed"),
    ("consumed->claim (hand-off)", "consumed", "claim"),
    ("claim->claimed (claim round trip, commit)", "claim", "claimed"),
    ("claimed->task", "claimed", "task"),
    ("created->claim", "created", "claim"),
    ("created->task", "created", "task"),
    ("task->outcome", "task", "outcome"),
    ("outcome->completed", "outcome", "completed"),
)


def hops(
    trace: Path, rows: list[list[str]], starts: dict[int, int], roles: dict[int, str]
) -> dict[str, Any]:
    """Each W2 job's hops from the probes' files (``tw_trace``) and the records: p50 / p99 of
    each hop in ms, their means over the slowest 2 % by created->claim, and how each job
    reached its worker (``by_read``: a blocked read; ``by_take``: the take script, i.e. no
    read was waiting) and whether its worker was busy when it was published (its consume
    call began after the publish); and the garbage collections of each process kind
    (``roles``: pid -> kind) during W2: how many of each generation, ms in all, the longest."""
    events: dict[str, dict[str, float]] = {}
    pauses: list[tuple[str, str, float, float]] = []  # kind, generation, ms, when
    for path in trace.glob("*.tsv"):
        kind = roles.get(int(path.stem), "other")
        for line in path.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[0].startswith("gc"):
                pauses.append((kind, parts[0], float(parts[1]), float(parts[2])))
            elif len(parts) == 3:
                events.setdefault(parts[1], {}).setdefault(parts[0], float(parts[2]))
    jobs = []
    for task_run_id, number, created, started in rows:
        ev = events.get(task_run_id)
        if ev is None or int(number) not in starts:
            continue
        ev["created"], ev["started"] = float(created), float(started)
        ev["task"] = starts[int(number)] / 1e9
        jobs.append(ev)
    if not jobs:
        return {}
    jobs.sort(key=lambda e: e.get("claim", e["started"]) - e["created"])
    tail = jobs[-max(len(jobs) // 50, 1) :]
    out: dict[str, Any] = {"jobs": len(jobs)}
    for name, a, b in HOPS:
        spans = sorted((e[b] - e[a]) * 1e3 for e in jobs if a in e and b in e)
        if spans:
            tail_spans = [(e[b] - e[a]) * 1e3 for e in tail if a in e and b in e]
            out[name] = {
                "p50": round(spans[len(spans) // 2], 3),
                "p99": round(spans[min(len(spans) - 1, int(len(spans) * 0.99))], 3),
                "slowest_2pct_mean": round(sum(tail_spans) / max(len(tail_spans), 1), 3),
            }
    out["by_read"] = sum("readcb" in e for e in jobs)
    out["by_take"] = sum("take" in e for e in jobs)
    out["worker_busy_at_publish"] = sum(
        e.get("consume_in", 0) > e.get("pub", 0) for e in jobs if "pub" in e
    )
    out["tail_busy"] = sum(e.get("consume_in", 0) > e.get("pub", 0) for e in tail if "pub" in e)
    out["tail_by_take"] = sum("take" in e for e in tail)
    first, last = min(e["created"] for e in jobs), max(e["task"] for e in jobs)
    gcs: dict[str, list[float]] = {}
    for kind, generation, ms, at in pauses:
        if first <= at <= last:
            gcs.setdefault(f"{kind} {generation}", []).append(ms)
    out["gc"] = {k: [len(v), round(sum(v), 2), round(max(v), 2)] for k, v in sorted(gcs.items())}
    return out


async def _delete_rabbitmq_queues(url: str, prefix: str) -> None:
    """Delete the run's queues from the (shared) RabbitMQ: lanes of ``default``, cancels."""
    import aio_pika

    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        for lane in ("high", "normal", "low"):
            await channel.queue_delete(f"{prefix}.default.{lane}")
        await channel.queue_delete(f"{prefix}.cancels.recent")
        await channel.exchange_delete(f"{prefix}.cancels")
    finally:
        await connection.close()


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _factory(peer_spec: PeerSpec) -> Any:
    def make(services: Services) -> Contender:
        return TickworkContender(peer_spec, services)

    return make


SPECS = [
    spec("tickwork", "anoop", 2, default=True),
    spec("tickwork-sync", "noop", 2, default=False),
    spec("tickwork-1req", "anoop", 1, default=False),
    spec("tickwork-jobs", "anoop", 2, default=False, submit="jobs"),
    # W1 per job, as the peers submit it: one producer thread calling enqueue per job.
    spec("tickwork-each", "anoop", 1, default=False, submit="each"),
    # W1 per job through the opt-in batching Producer (linger 5 ms): per-job calls, not
    # per-call durability (close() waits for every run to be stored).
    spec("tickwork-producer", "anoop", 1, default=False, submit="producer"),
    spec("tickwork-rabbitmq", "anoop", 2, default=False, broker=RABBITMQ),
]
for _spec in SPECS:
    register(_spec.name, _factory(_spec), default=_spec.default)
