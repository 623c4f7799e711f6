"""tickwork (distributed mode) for the peer benchmark; runs inside bench/.venvs/tickwork.

Processes (``peers/tickwork.py`` starts them): ``tickwork scheduler``, ``workers`` x ``tickwork
worker --concurrency C`` and ``tickwork api``, over a fresh PostgreSQL database and the run's
Redis, configured by ``TICKWORK_*`` variables. ``setup`` runs ``tickwork db upgrade``, which
writes the first admin token to ``$TICKWORK_DATA_DIR/admin.token``; python tasks need it.

Work goes through the public SDK (``tickwork.Client``, i.e. the HTTP API), in one of two ways
(``PEERBENCH_TW_SUBMIT``):

- ``enqueue`` (default), task-queue style like the peers' ``task.delay(...)``: one job per
  workload, ``<tag>-jobs`` (a paused cron job that never fires by itself), and a run of it per
  submit with ``{"tag": …, "i": …}`` as params. W1 ``enqueue_many`` (``POST
  /api/v1/jobs/{name}/runs/batch``, 5,000 runs per request, ``PEERBENCH_TW_INFLIGHT`` requests
  in flight), W2 one ``enqueue`` (``POST /api/v1/jobs/{name}/runs``) per job.
- ``each``: as ``enqueue``, but W1 too sends one ``enqueue`` per job, as the peers' W1 does
  (``task.delay`` per job), from ``PEERBENCH_TW_INFLIGHT`` threads.
- ``producer``: as ``each``, but W1's per-job calls go through the opt-in batching
  ``tickwork.sdk.producer.Producer`` (linger ``PEERBENCH_TW_LINGER`` s, default 0.005): a call
  returns a future at once, the calls within a linger go as one ``enqueue_many``; W1's submit
  ends when ``close()`` returned, every run stored. Not per-call durability: a contender of its
  own, labelled so.
- ``jobs``: a job per submit, named ``<tag>-<i>``: W1 ``create_jobs`` (``POST /api/v1/jobs/batch``,
  1,000 jobs per request), W2 one ``create_job`` (``POST /api/v1/jobs``) per job.

W3 creates ``at`` jobs through ``create_jobs`` either way. Either way ``job_name LIKE '<tag>-%'``
selects a workload's runs. The task is ``peer_tickwork:noop`` (or ``anoop``,
``PEERBENCH_TW_TASK``) with ``{"tag": …, "i": …}``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import httpx2
from peer_record import record

from tickwork.sdk import Client as SdkClient
from tickwork.sdk import JobInput

BATCH = 1000  # the job batch endpoint's maximum
RUN_BATCH = 5000  # the enqueue batch endpoint's maximum
INFLIGHT = int(os.environ.get("PEERBENCH_TW_INFLIGHT", "2"))
TASK = os.environ.get("PEERBENCH_TW_TASK", "noop")
SUBMIT = os.environ.get("PEERBENCH_TW_SUBMIT", "enqueue")
if SUBMIT not in ("enqueue", "each", "producer", "jobs"):
    raise SystemExit(f"PEERBENCH_TW_SUBMIT must be enqueue, each, producer or jobs, not {SUBMIT!r}")
LINGER = float(os.environ.get("PEERBENCH_TW_LINGER", "0.005"))
#: ``each``: W1 as the peers submit it, one ``enqueue`` (``POST /api/v1/jobs/{name}/runs``) per
#: job, ``INFLIGHT`` threads each with its own client (1: the peers' one producer thread).
ONE_RUN = SUBMIT == "each"
ENQUEUES = SUBMIT in ("enqueue", "each", "producer")
BULK = (
    f"none: SDK enqueue per job (POST /api/v1/jobs/{{name}}/runs), {INFLIGHT} thread(s)"
    if ONE_RUN
    else f"opt-in Producer.enqueue per job, one thread, linger {LINGER * 1000:g} ms: the calls "
    "within a linger go as one enqueue_many (POST /api/v1/jobs/{name}/runs/batch); "
    "submit ends at close(), every run stored"
    if SUBMIT == "producer"
    else f"SDK enqueue_many (POST /api/v1/jobs/{{name}}/runs/batch), {RUN_BATCH} runs per request, "
    f"{INFLIGHT} request(s) in flight"
    if SUBMIT == "enqueue"
    else f"SDK create_jobs (POST /api/v1/jobs/batch), {BATCH} jobs per request, "
    f"{INFLIGHT} request(s) in flight"
)
#: The workloads that submit runs of one job each in ``enqueue`` mode (W3 creates jobs).
ENQUEUED_TAGS = ("wu", "w1", "w2")
NEVER = {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"}  # paused anyway


def noop(tag: str, i: int) -> None:
    """A plain function: the worker runs it on its task thread pool."""
    record(tag, i)


async def anoop(tag: str, i: int) -> None:
    """An ``async def``: the worker awaits it on its event loop."""
    record(tag, i)


def job(tag: str, i: int, schedule: dict[str, Any]) -> JobInput:
    task = {"kind": "python", "target": f"peer_tickwork:{TASK}", "kwargs": {"tag": tag, "i": i}}
    return cast(JobInput, {"name": f"{tag}-{i}", "schedule": schedule, "task": task})


NOW: dict[str, Any] = {"kind": "now"}


def _url() -> str:
    return f"http://127.0.0.1:{os.environ['TICKWORK_PORT']}"


def _token() -> str:
    return (Path(os.environ["TICKWORK_DATA_DIR"]) / "admin.token").read_text().strip()


def wait_ready(timeout: float = 60.0) -> None:
    """Until the API answers ``/readyz`` (its store answers)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx2.get(f"{_url()}/readyz", timeout=2.0).raise_for_status()
            return
        except httpx2.HTTPError:  # not up yet (connection refused, 503)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def workload_job(tag: str) -> JobInput:
    """The one job of a workload in ``enqueue`` mode: its runs get their params per submit."""
    task = {"kind": "python", "target": f"peer_tickwork:{TASK}"}
    job: dict[str, Any] = {"name": f"{tag}-jobs", "schedule": NEVER, "task": task}
    if "params" in JobInput.__annotations__:  # a baseline older than params contracts has none
        job["params"] = {"properties": {"tag": {"type": "string"}, "i": {"type": "integer"}}}
    return cast(JobInput, job)


class Client:
    def __init__(self) -> None:
        wait_ready()
        self._clients = [SdkClient(_url(), token=_token(), timeout=120.0) for _ in range(INFLIGHT)]
        if ENQUEUES:
            for tag in ENQUEUED_TAGS:  # before any timing starts
                self._clients[0].apply_job(workload_job(tag))
                self._clients[0].pause(f"{tag}-jobs")

    def _in_flight(
        self, send: Callable[[SdkClient, list[Any]], object], batches: list[Any]
    ) -> None:
        def each(k: int) -> None:
            for chunk in batches[k::INFLIGHT]:
                send(self._clients[k], chunk)

        with ThreadPoolExecutor(INFLIGHT) as pool:
            list(pool.map(each, range(INFLIGHT)))

    def submit_bulk(self, tag: str, ids: range) -> None:
        if SUBMIT == "producer":
            self._through_producer(tag, ids)
            return
        if ONE_RUN:
            lanes = [list(ids[k::INFLIGHT]) for k in range(INFLIGHT)]
            self._in_flight(lambda c, lane: [self._enqueue(c, tag, i) for i in lane], lanes)
            return
        if SUBMIT == "enqueue":
            params = [{"tag": tag, "i": i} for i in ids]
            runs = [params[s : s + RUN_BATCH] for s in range(0, len(params), RUN_BATCH)]
            self._in_flight(lambda c, chunk: c.enqueue_many(f"{tag}-jobs", chunk), runs)
            return
        jobs = [job(tag, i, NOW) for i in ids]
        batches = [jobs[s : s + BATCH] for s in range(0, len(jobs), BATCH)]
        self._in_flight(lambda c, chunk: c.create_jobs(chunk, allow_past=True), batches)

    def _through_producer(self, tag: str, ids: range) -> None:
        """One ``Producer.enqueue`` per job from this thread; returns once every run is
        stored (``close`` flushes and waits), and fails if any was refused."""
        from tickwork.sdk.producer import Producer  # newer than some baselines

        futures = []
        with Producer(self._clients[0], linger=LINGER) as producer:
            for i in ids:
                futures.append(producer.enqueue(f"{tag}-jobs", {"tag": tag, "i": i}))
        for future in futures:
            future.result()

    @staticmethod
    def _enqueue(client: SdkClient, tag: str, i: int) -> None:
        client.enqueue(f"{tag}-jobs", {"tag": tag, "i": i})

    def submit(self, tag: str, i: int) -> None:
        if ENQUEUES:
            self._enqueue(self._clients[0], tag, i)
        else:
            self._clients[0].create_job(job(tag, i, NOW))

    def submit_at_many(self, tag: str, jobs: list[tuple[int, datetime]]) -> list[int]:
        """``at`` jobs through the batch endpoint, in the given (shuffled) order; returns,
        for each job, when the request that created it returned."""
        bodies = [job(tag, i, {"kind": "at", "at": due.isoformat()}) for i, due in jobs]
        done: list[int] = []
        for s in range(0, len(bodies), BATCH):
            chunk = bodies[s : s + BATCH]
            self._clients[0].create_jobs(chunk)
            done += [time.time_ns()] * len(chunk)
        return done

    def close(self) -> None:
        for client in self._clients:
            client.close()


def setup() -> None:
    """``tickwork db upgrade``: the schema, and the first admin token in TICKWORK_DATA_DIR."""
    exe = Path(sys.executable).with_name("tickwork")
    try:
        subprocess.run([str(exe), "db", "upgrade"], check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"tickwork db upgrade failed: {exc.stderr.strip()}") from None
