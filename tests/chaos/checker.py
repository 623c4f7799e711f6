"""The chaos suite's checker: tickwork's account (its tables) against the execution ledger
the tasks wrote themselves (``tests/fixtures/ledger_tasks.py:record_run``).

It proves, and reports in numbers:

- 0 lost runs: every enqueued run (and every ``at`` job's one run) ended ``success``;
- 0 doubled successes: one run per ``at`` job and logical date, one committed success per
  run, and that success is in the ledger (same attempt, same worker process);
- every duplicate execution attributable: a further ``done`` line of a run comes from a
  worker the nemesis killed or froze (its attempt was reaped, the run retried);
- 0 writes accepted from a stale epoch (the audit trigger, ``tests/e2e/audit.py``);
- failover within TTL + 5 s after every leader death or freeze.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e import audit
from tests.e2e.cluster import Cluster, holder_pid


@dataclass
class Report:
    runs: int = 0
    succeeded: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    executions: int = 0  # ``done`` lines in the ledger
    duplicates: int = 0  # ``done`` lines beyond the committed one
    unattributed: list[str] = field(default_factory=list)
    uncommitted: list[str] = field(default_factory=list)  # success without its ledger line
    stale_epoch_writes: int = 0
    failovers_s: list[float] = field(default_factory=list)
    slow_failovers: list[float] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        found = [f"lost: {r}" for r in self.lost[:20]]
        found += [f"doubled: {d}" for d in self.doubled[:20]]
        found += [f"unattributed duplicate: {u}" for u in self.unattributed[:20]]
        found += [f"success not in the ledger: {u}" for u in self.uncommitted[:20]]
        found += [f"{self.stale_epoch_writes} write(s) from a stale epoch"] * bool(
            self.stale_epoch_writes
        )
        found += [f"failover took {s:.1f} s" for s in self.slow_failovers]
        return found

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("lost", "doubled", "unattributed", "uncommitted"):
            data[f"{name}_count"] = len(data[name])
            data[name] = data[name][:100]
        data["ok"] = not self.problems
        return data


def ledger_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def task_runs(cluster: Cluster, job: str) -> dict[str, tuple[str, int, str | None]]:
    """run id -> (state, attempt, worker id) of the job's task runs."""
    rows = cluster.sql(
        "SELECT run_id, state, attempt, worker_id FROM task_runs WHERE job_name = %s", job
    )
    return {str(r[0]): (str(r[1]), int(r[2]), r[3]) for r in rows}


def check(
    cluster: Cluster,
    ledger: Path,
    job: str,
    *,
    submitted: Collection[str],
    at_jobs: Collection[str],
    suspects: Collection[int],
) -> Report:
    report = Report(runs=len(submitted) + len(at_jobs))
    account = task_runs(cluster, job)
    for run_id in submitted:
        state = account.get(run_id, ("missing", 0, None))[0]
        if state != "success":
            report.lost.append(f"{run_id} ({state})")
    # The job's own schedule (an instant in 2100) has one scheduled run, never due.
    extra = [r for r in set(account) - set(submitted) if account[r][0] != "scheduled"]
    report.doubled += [f"{job}: run {r} not submitted" for r in extra]
    _check_at_jobs(cluster, at_jobs, report)
    done: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in ledger_lines(ledger):
        if line["event"] == "done" and line.get("run_id"):
            done[line["run_id"]].append(line)
    report.executions = sum(len(lines) for lines in done.values())
    for run_id, (state, attempt, worker) in account.items():
        if state != "success":
            continue
        report.succeeded += 1
        pid = None if worker is None else holder_pid(worker)
        lines = done.get(run_id, [])
        committed = [ln for ln in lines if ln["attempt"] == attempt and ln["worker_pid"] == pid]
        if not committed:
            report.uncommitted.append(f"{run_id} attempt {attempt} by {worker}: {lines}")
        others = [ln for ln in lines if ln not in committed[:1]]
        report.duplicates += len(others)
        report.unattributed += [
            f"{run_id}: {ln}" for ln in others if ln["worker_pid"] not in suspects
        ]
    report.stale_epoch_writes = len(audit.stale_leader_writes(cluster.sql))
    return report


def _check_at_jobs(cluster: Cluster, at_jobs: Collection[str], report: Report) -> None:
    if not at_jobs:
        return
    rows = cluster.sql(
        "SELECT job_name, logical_date, state FROM task_runs WHERE job_name = ANY(%s)",
        list(at_jobs),
    )
    per_key = Counter((r[0], r[1]) for r in rows)
    report.doubled += [f"{j}@{d}: {n} runs" for (j, d), n in per_key.items() if n > 1]
    ran = {r[0] for r in rows if r[2] == "success"}
    report.lost += [f"{j} (at job)" for j in at_jobs if j not in ran]
    report.succeeded += len(ran)
