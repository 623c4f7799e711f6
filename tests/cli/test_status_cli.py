"""``tickwork status`` and ``job add``'s warning, through the API (``GET /api/v1/status``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tests.cli.conftest import Cli
from tickwork.ports import WorkerInfo


def register(cli: Cli, wid: str, queues: tuple[str, ...], kind: str = "worker") -> None:
    t = datetime.now(UTC)
    info = WorkerInfo(wid, "h", 1, queues, 4, t, t, kind=kind)
    cli.portal.call(cli.store.register_worker, info)


def test_status_json_shows_leaderless_cluster_and_its_warnings(cli: Cli) -> None:
    found = json.loads(cli.ok("status", "-o", "json").stdout)
    assert found["leader"] is None
    assert found["schema_revision"] is not None and found["version"]
    assert [w["code"] for w in found["warnings"]] == ["no_leader"]


def test_job_on_an_unserved_queue_warns_in_job_add_and_status(cli: Cli) -> None:
    register(cli, "up-1", ("default",), kind="embedded")
    added = cli.ok("job", "add", "gq", "--now", "--queue", "gpu", "--", "true")
    assert "added job gq" in added.stdout
    assert "warning: no live worker takes queue 'gpu'" in added.stderr

    table = cli.ok("status").stdout
    assert "leader" in table and "up-1" in table
    assert "warning: queue 'gpu' has 1 task run(s) waiting and no live worker takes it" in table
    found = json.loads(cli.ok("status", "-o", "json").stdout)
    assert found["mode"] == "embedded" and found["leader"]["holder"] == "up-1"
    (gpu,) = [q for q in found["queues"] if q["queue"] == "gpu"]
    assert (gpu["queued"], gpu["workers"]) == (1, 0)


def test_no_warning_when_a_worker_takes_the_queue(cli: Cli) -> None:
    register(cli, "w-gpu", ("gpu",))
    added = cli.ok("job", "add", "gq", "--now", "--queue", "gpu", "--", "true")
    assert "warning" not in added.stderr
    register(cli, "up-2", ("*",), kind="embedded")
    assert (
        "warning" not in cli.ok("job", "add", "other", "--now", "--queue", "x", "--", "true").stderr
    )
