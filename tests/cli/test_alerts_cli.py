"""``--start-deadline`` / ``--sla`` on ``job add``, in ``job show`` and its YAML (which
``job apply`` takes back unchanged), bad values as one error line, and the run alerts in
``tickwork status``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, error_line
from tickwork.core.alerts import Alert, AlertKind, WatchedRun
from tickwork.core.model import RunState

CRON = ["--cron", "0 2 * * *"]


def test_job_add_sets_both_and_job_show_says_so(cli: Cli) -> None:
    cli.ok("job", "add", "nightly", *CRON, "--start-deadline", "600", "--sla", "5400", "--", "true")
    shown = cli.ok("job", "show", "nightly").stdout
    assert "start deadline" in shown and "600s" in shown and "5400s" in shown
    cli.ok("job", "add", "plain", *CRON, "--", "true")
    assert "300s (default)" in cli.ok("job", "show", "plain").stdout
    found = json.loads(cli.ok("job", "show", "nightly", "-o", "json").stdout)
    assert (found["start_deadline"], found["sla"]) == (600.0, 5400.0)


def test_the_yaml_of_job_show_applies_back_unchanged(cli: Cli, tmp_path: Path) -> None:
    cli.ok("job", "add", "nightly", *CRON, "--sla", "90", "--", "true")
    definition = cli.ok("job", "show", "nightly", "-o", "yaml").stdout
    assert "sla: 90.0" in definition and "start_deadline" not in definition
    path = tmp_path / "nightly.yaml"
    path.write_text(definition)
    assert cli.ok("job", "apply", str(path)).stdout.strip() == "unchanged job nightly"
    path.write_text(definition.replace("sla: 90.0", "start_deadline: 30"))
    assert cli.ok("job", "apply", str(path)).stdout.strip() == "updated job nightly"
    found = json.loads(cli.ok("job", "show", "nightly", "-o", "json").stdout)
    assert (found["start_deadline"], found["sla"]) == (30.0, None)


@pytest.mark.parametrize(
    ("flag", "value"), [("--sla", "-1"), ("--start-deadline", "0"), ("--sla", "1e12")]
)
def test_a_bad_value_is_one_error_line_and_creates_nothing(cli: Cli, flag: str, value: str) -> None:
    line = error_line(cli("job", "add", "j", *CRON, flag, value, "--", "true"))
    assert line.startswith(f"error: {flag.removeprefix('--').replace('-', '_')}: must be"), line
    assert json.loads(cli.ok("job", "list", "-o", "json").stdout)["jobs"] == []


def test_a_bad_value_in_a_definition_is_one_error_line(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\nschedule: {kind: cron, cron: '0 2 * * *'}\nsla: soon\n"
        "tasks: [{name: main, kind: shell, argv: ['true']}]\n"
    )
    line = error_line(cli("job", "apply", str(path)))
    assert line == f"error: {path}: sla: must be a number of seconds, not 'soon'"


def test_status_warns_of_the_alerts_of_the_last_hour(cli: Cli) -> None:
    now = datetime.now(UTC)
    run = WatchedRun("r-late", "nightly", now - timedelta(minutes=9), RunState.QUEUED)
    late = Alert(AlertKind.MISSED, run, timedelta(minutes=5), timedelta(minutes=4))
    cli.portal.call(cli.store.record_alerts, [late], now)
    table = cli.ok("status").stdout
    assert "missed runs (1 h)" in table
    assert "warning: 1 run(s) did not start within their job's start_deadline" in table
    assert "r-late" in table
    found = json.loads(cli.ok("status", "-o", "json").stdout)
    assert found["missed_runs_last_hour"] == 1 and found["alerts"][0]["run_id"] == "r-late"
