"""The workload of the distributed acceptance tests, their execution ledger, and the checker.

``Workload`` builds the jobs a test creates and computes, from their definitions alone (never
from tickwork's tables), the logical dates each must run for: an ``at`` job its instant, a
cron job (``* * * * *`` bounded by ``start`` = ``end`` - 30 s) exactly its one fire, a ``now``
job one run at whatever instant it was created.

``Workload.check`` then holds tickwork's account (the API) against the ledger the tasks wrote
(``tests/fixtures/ledger_tasks.py``) and lists every violation:

- no run lost: every expected (job, logical date) has a run, and it succeeded;
- none doubled: no second run for a (job, logical date), none for an unexpected one;
- exactly one successful execution per (job, logical date) in the ledger, and it is the one
  tickwork committed (same attempt, same worker process);
- any further execution is attributed to a fault: it is an orphan of a worker the test
  killed (a shell task runs on after its worker's ``kill -9``, and its result is refused).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.e2e.cluster import REPO, holder_pid
from tickwork.sdk import Client, JobInput, RetryInput, RunInfo, TaskInput

FINISHED = {"success", "failed", "cancelled", "skipped"}
#: Retries after a zombie sweep: 1 s apart, no jitter.
RETRY: RetryInput = {"max_attempts": 3, "initial_delay": 1.0, "multiplier": 1.0, "jitter": 0.0}


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Line:
    """One ledger line: an execution's ``start``, or its ``done`` (a success)."""

    event: str
    runner: str  # shell | python
    job: str
    logical_date: datetime | None  # None: a python task (its job is its key)
    attempt: int | None
    pid: int
    worker_pid: int
    token: str
    at: float
    orphan: bool = False

    @staticmethod
    def of(raw: dict[str, Any]) -> Line:
        date = raw["logical_date"]
        return Line(
            raw["event"], raw["runner"], raw["job"], None if date is None else parse(date),
            raw["attempt"], raw["pid"], raw["worker_pid"], raw["token"], raw["at"],
            raw.get("orphan", False),
        )  # fmt: skip


def read_ledger(path: Path) -> list[Line]:
    if not path.exists():
        return []
    return [Line.of(json.loads(text)) for text in path.read_text().splitlines() if text]


@dataclass
class Workload:
    """Jobs to create, and the logical dates each must run for (None: one, any date)."""

    ledger: Path
    jobs: list[JobInput] = field(default_factory=list)
    expected: dict[str, set[datetime] | None] = field(default_factory=dict)

    def shell(self, sleep: float) -> TaskInput:
        argv = [sys.executable, "-m", "tests.fixtures.ledger_tasks", str(self.ledger)]
        return {"kind": "shell", "argv": [*argv, "--sleep", str(sleep)], "cwd": str(REPO)}

    def at(self, name: str, instant: datetime, sleep: float = 0.2) -> None:
        schedule = {"kind": "at", "at": iso(instant)}
        self._add(name, schedule, self.shell(sleep), {instant.astimezone(UTC)})

    def cron_once(self, name: str, fire: datetime, sleep: float = 0.2) -> None:
        """A ``* * * * *`` job bounded so that exactly one fire, ``fire``, is due."""
        assert fire.second == 0 and fire.microsecond == 0, fire
        bounds = {"start": iso(fire), "end": iso(fire + timedelta(seconds=30))}
        schedule = {"kind": "cron", "cron": "* * * * *", "timezone": "UTC", **bounds}
        self._add(name, schedule, self.shell(sleep), {fire.astimezone(UTC)})

    def now(self, name: str, sleep: float = 0.2, *, python: bool = False) -> None:
        task: TaskInput = self.shell(sleep)
        if python:
            kwargs = {"ledger": str(self.ledger), "job": name, "sleep": sleep}
            task = {"kind": "python", "target": "tests.fixtures.ledger_tasks:record",
                    "kwargs": kwargs}  # fmt: skip
        self._add(name, {"kind": "now"}, task, None)

    def _add(self, name: str, schedule: Any, task: TaskInput, dates: set[datetime] | None) -> None:
        self.jobs.append({"name": name, "schedule": schedule, "task": task, "retry": RETRY})
        self.expected[name] = dates

    def create(self, client: Client) -> None:
        """Create the jobs (one transaction) that are not created yet."""
        created = {job["name"] for job in client.list_jobs(limit=1000)["jobs"]}
        todo = [job for job in self.jobs if job["name"] not in created]
        if todo:
            client.create_jobs(todo)

    # -- checking -------------------------------------------------------------------------

    def outstanding(self, client: Client) -> list[str]:
        """Expected runs not finished yet (empty: all done), for polling."""
        runs = runs_by_job(client)
        left = []
        for job, dates in self.expected.items():
            finished = [r for r in runs[job] if r["state"] in FINISHED]
            if dates is None:
                left += [] if finished else [f"{job}: {[r['state'] for r in runs[job]]}"]
                continue
            done = {parse(r["logical_date"]) for r in finished}
            left += [f"{job}@{iso(d)}" for d in sorted(dates - done)]
        return left

    def check(self, client: Client, killed_workers: Collection[int] = ()) -> list[str]:
        """Every violation of exactly-once (see the module docstring); empty if none."""
        lines = read_ledger(self.ledger)
        done = [ln for ln in lines if ln.event == "done"]
        runs = runs_by_job(client)
        problems = [f"ledger: job {ln.job!r} is not ours" for ln in lines
                    if ln.job not in self.expected]  # fmt: skip
        for job, dates in self.expected.items():
            problems += _check_runs(job, dates, runs[job])
            for run in runs[job]:
                problems += _check_committed(client, run, [ln for ln in done if ln.job == job])
        problems += [
            f"ledger: unattributed second execution {ln}" for ln in done
            if ln.orphan and ln.worker_pid not in killed_workers
        ]  # fmt: skip
        return problems


def runs_by_job(client: Client) -> defaultdict[str, list[RunInfo]]:
    found: defaultdict[str, list[RunInfo]] = defaultdict(list)
    for run in client.list_runs(limit=1000)["runs"]:
        found[run["job_name"]].append(run)
    return found


def _check_runs(job: str, dates: set[datetime] | None, runs: list[RunInfo]) -> list[str]:
    """The API's runs of ``job``: none lost, none doubled, none unexpected, all succeeded."""
    problems = [f"{job}@{r['logical_date']}: run {r['state']}" for r in runs
                if r["state"] != "success"]  # fmt: skip
    got = [parse(r["logical_date"]) for r in runs]
    if dates is None:
        return problems + ([] if len(got) == 1 else [f"{job}: {len(got)} runs, not 1"])
    problems += [f"{job}@{iso(d)}: lost (no run)" for d in sorted(dates - set(got))]
    problems += [f"{job}@{iso(d)}: unexpected run" for d in sorted(set(got) - dates)]
    problems += [f"{job}@{iso(d)}: {got.count(d)} runs" for d in set(got) if got.count(d) > 1]
    return problems


def _check_committed(client: Client, run: RunInfo, done: list[Line]) -> list[str]:
    """Exactly one successful execution of ``run`` outside orphans, and it is the attempt
    (and the worker process) tickwork committed as the success."""
    date = parse(run["logical_date"])
    mine = [ln for ln in done if ln.logical_date in (None, date)]
    live = [ln for ln in mine if not ln.orphan]
    where = f"{run['job_name']}@{iso(date)}"
    if run["state"] != "success":
        return []  # reported by _check_runs
    if len(live) != 1:
        return [f"{where}: {len(live)} successful executions in the ledger, not 1: {live}"]
    (task_run,) = client.get_run(run["id"])["task_runs"]
    (line,) = live
    worker = task_run["worker_id"]
    problems = []
    if line.attempt is not None and line.attempt != task_run["attempt"]:
        problems.append(f"{where}: ledger attempt {line.attempt}, committed {task_run['attempt']}")
    if worker is None or holder_pid(worker) != line.worker_pid:
        problems.append(f"{where}: ledger worker pid {line.worker_pid}, committed by {worker}")
    return problems
