"""tickwork (distributed mode) for the peer benchmark; runs inside bench/.venvs/tickwork.

Processes (``peers/tickwork.py`` starts them): ``tickwork scheduler``, ``workers`` x ``tickwork
worker --concurrency C`` and ``tickwork api``, over a fresh PostgreSQL database and the run's
Redis, configured by ``TICKWORK_*`` variables. ``setup`` runs ``tickwork db upgrade``, which
writes the first admin token to ``$TICKWORK_DATA_DIR/admin.token``; python tasks need it.

Jobs go through the public SDK (``tickwork.Client``, i.e. the HTTP API): W1 through
``create_jobs`` (``POST /api/v1/jobs/batch``, 1,000 jobs per request, ``PEERBENCH_TW_INFLIGHT``
requests in flight), W2 one ``create_job`` (``POST /api/v1/jobs``) per job, W3 ``at`` jobs
through ``create_jobs``. Each job is named ``<tag>-<id>`` and runs ``peer_tickwork:noop`` (or
``anoop``, ``PEERBENCH_TW_TASK``) with ``{"tag": …, "i": …}``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import httpx2
from peer_record import record

from tickwork.sdk import Client as SdkClient
from tickwork.sdk import JobInput

BATCH = 1000  # the batch endpoint's maximum
INFLIGHT = int(os.environ.get("PEERBENCH_TW_INFLIGHT", "2"))
TASK = os.environ.get("PEERBENCH_TW_TASK", "noop")
BULK = (
    f"SDK create_jobs (POST /api/v1/jobs/batch), {BATCH} jobs per request, "
    f"{INFLIGHT} request(s) in flight"
)


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


class Client:
    def __init__(self) -> None:
        wait_ready()
        self._clients = [SdkClient(_url(), token=_token(), timeout=120.0) for _ in range(INFLIGHT)]

    def _batches(self, batches: list[list[JobInput]]) -> None:
        def send(k: int) -> None:
            for chunk in batches[k::INFLIGHT]:
                self._clients[k].create_jobs(chunk, allow_past=True)

        with ThreadPoolExecutor(INFLIGHT) as pool:
            list(pool.map(send, range(INFLIGHT)))

    def submit_bulk(self, tag: str, ids: range) -> None:
        jobs = [job(tag, i, NOW) for i in ids]
        self._batches([jobs[s : s + BATCH] for s in range(0, len(jobs), BATCH)])

    def submit(self, tag: str, i: int) -> None:
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
