"""``tickwork status``: the cluster through the API (any mode; no database credentials here).

Exit status 0 with warnings printed: a warning is news for people, not a failure of the
command. ``-o json`` prints the API's answer as is.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from tickwork.cli.common import connect
from tickwork.cli.options import Output, OutputOption
from tickwork.cli.output import is_data, print_data, print_fields, print_line, print_table, when
from tickwork.sdk import ApiError, Client, ClientError
from tickwork.sdk.types import JobInfo


def status(ctx: typer.Context, output: OutputOption = Output.TABLE) -> None:
    """The leader and standbys, workers by queue, queue depths and ages, and warnings.

    Asked through the API (GET /api/v1/status, a read token): works against any server, in
    either mode, without database credentials.
    """
    with connect(ctx) as client:
        found = client.status()
    if is_data(output):
        print_data(output, found)
        return
    print_report(found)


def print_report(found: dict[str, Any]) -> None:
    leader = found["leader"]
    print_fields(
        {
            "mode": found["mode"],
            "version": f"{found['version']} (database schema {found['schema_revision'] or '-'})",
            "leader": "NONE" if leader is None else leader["holder"],
            "epoch": "-" if leader is None or leader["epoch"] is None else leader["epoch"],
            "lease expires": when(leader and leader["lease_expires_at"]),
            "standbys": ", ".join(found["standbys"]) or "-",
            "dead letters": found["dead_letters"],
            "missed fires (1 h)": found["missed_fires_last_hour"],
            "missed runs (1 h)": found.get("missed_runs_last_hour", 0),
            "SLA misses (1 h)": found.get("sla_misses_last_hour", 0),
        }
    )
    print_table(
        ["worker", "kind", "queues", "running", "concurrency", "last heartbeat", "state"],
        [
            (
                w["id"],
                w["kind"],
                ",".join(w["queues"]),
                w["running"],
                w["concurrency"],
                when(w["heartbeat_at"]),
                "live" if w["live"] else "LOST",
            )
            for w in found["workers"]
        ],
        empty="no workers",
    )
    print_table(
        ["queue", "due", "queued", "running", "oldest wait", "workers", "busy", "free"],
        [
            (
                q["queue"],
                q["due"],
                q["queued"],
                q["running"],
                "-" if q["oldest_seconds"] is None else f"{q['oldest_seconds']:.1f} s",
                q["workers"],
                q["busy"],
                q["free"],
            )
            for q in found["queues"]
        ],
        empty="no queues with work or workers",
    )
    for warning in found["warnings"]:
        print_line(f"warning: {warning['message']}")


def warn_if_unserved(client: Client, job: JobInfo) -> None:
    """After saving ``job``: a warning on stderr if it names a queue no live worker takes
    (its runs would wait forever). Silent when the status cannot be read (a token without
    the read scope, an older server): the job is saved either way."""
    queues = {job["queue"]}
    try:
        served = set(client.status()["served_queues"])
    except (ApiError, ClientError, KeyError):
        return
    missing = sorted(queues - served) if "*" not in served else []
    for queue in missing:
        sys.stderr.write(
            f"warning: no live worker takes queue {queue!r}: runs of {job['name']} wait until "
            f"one does (tickwork worker --queues {queue}, or tickwork up --queues ...,{queue})\n"
        )
