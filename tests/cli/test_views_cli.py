"""What people see: tables that fit 80 and 120 columns, the job list's next fire and last
runs, ``job show -o yaml`` round-tripping into ``job apply``, and ``job edit``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tests.cli.conftest import Cli
from tickwork.cli.main import app


def at_width(cli: Cli, width: int, *args: str) -> Result:
    result = CliRunner().invoke(app, list(args), obj=cli.deps, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def _jobs(cli: Cli) -> None:
    cli.ok("job", "add", "nightly-warehouse-export", "--cron", "30 2 * * *", "--tz",
           "Europe/Berlin", "--", "pg_dump", "--format=custom", "warehouse")  # fmt: skip
    cli.ok("job", "add", "later", "--at", "2099-01-01T00:00:00Z", "--", "true")
    cli.ok("job", "add", "now", "--now", "--", "true")


@pytest.mark.parametrize("width", [80, 120])
def test_tables_fit_the_terminal(cli: Cli, width: int) -> None:
    _jobs(cli)
    for args in (("run", "list"), ("job", "list"), ("pool", "list"), ("token", "list")):
        out = at_width(cli, width, *args).stdout
        for line in out.splitlines():
            assert len(line) <= width, f"{args}: {line!r} ({len(line)} > {width})"
    header = at_width(cli, width, "run", "list").stdout.splitlines()[0]
    assert header.split() == [
        "id", "┃", "job", "┃", "state", "┃", "trigger", "┃", "logical", "date", "┃",
        "started", "┃", "finished",
    ]  # fmt: skip


def test_columns_give_way_by_priority_on_a_narrow_terminal(cli: Cli) -> None:
    _jobs(cli)
    header = at_width(cli, 50, "run", "list").stdout.splitlines()[0]
    assert [c.strip() for c in header.split("┃")] == ["id", "job", "state", "logical date"]
    jobs = [c.strip() for c in at_width(cli, 60, "job", "list").stdout.splitlines()[0].split("┃")]
    assert jobs[0] == "name" and jobs[-2:] == ["next fire", "last runs"] and "paused" not in jobs


def test_wide_shows_every_column_and_whole_ids(cli: Cli) -> None:
    _jobs(cli)
    run_id = json.loads(cli.ok("run", "list", "-o", "json").stdout)["runs"][0]["id"]
    wide = at_width(cli, 200, "run", "list", "-o", "wide").stdout
    assert run_id in wide and "finished" in wide.splitlines()[0]
    assert run_id not in at_width(cli, 80, "run", "list").stdout


def test_job_list_shows_a_pending_at_fire_and_the_last_runs(cli: Cli) -> None:
    _jobs(cli)
    out = at_width(cli, 120, "job", "list").stdout
    later = next(line for line in out.splitlines() if line.startswith("later"))
    assert "in " in later  # 2099: an `at` job's fire to come, as a relative time
    now = next(line for line in out.splitlines() if line.startswith("now "))
    assert "•" in now  # its one run, queued
    tagged = json.loads(cli.ok("job", "list", "--tag", "nope", "-o", "json").stdout)
    assert tagged["jobs"] == []


def test_job_show_yaml_round_trips_into_apply(cli: Cli, tmp_path: Path) -> None:
    _jobs(cli)
    for name in ("nightly-warehouse-export", "later"):
        definition = tmp_path / f"{name}.yaml"
        definition.write_text(cli.ok("job", "show", name, "-o", "yaml").stdout)
        assert cli.ok("job", "apply", str(definition)).stdout.strip() == f"unchanged job {name}"


def test_job_edit_applies_what_was_saved(cli: Cli, tmp_path: Path) -> None:
    _jobs(cli)
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('priority: 0', 'priority: 7', 1))\n"
    )
    env = {"EDITOR": f"{sys.executable} {editor}", "VISUAL": None}
    result = CliRunner().invoke(app, ["job", "edit", "later"], obj=cli.deps, env=env)
    assert result.stdout.strip() == "updated job later", (result.stdout, result.stderr)
    shown = json.loads(cli.ok("job", "show", "later", "-o", "json").stdout)
    assert shown["priority"] == 7
    same = {"EDITOR": "true", "VISUAL": None}
    result = CliRunner().invoke(app, ["job", "edit", "later"], obj=cli.deps, env=same)
    assert result.stdout.strip() == "unchanged job later (nothing saved)"


def test_run_logs_of_a_task_that_has_not_run_says_so(cli: Cli) -> None:
    cli.ok("job", "add", "later", "--at", "2099-01-01T00:00:00Z", "--", "true")
    run_id = json.loads(cli.ok("run", "list", "-o", "json").stdout)["runs"][0]["id"]
    result = cli.ok("run", "logs", run_id)
    assert result.stdout == ""
    assert "task main has not run (scheduled): no output yet" in result.stderr


DECLARED_BACKWARDS = """\
name: backwards
schedule: {kind: now}
tasks:
  - {name: load, kind: shell, argv: ["true"], upstream: [transform]}
  - {name: transform, kind: shell, argv: ["true"], upstream: [extract_a, extract_b]}
  - {name: extract_b, kind: shell, argv: ["true"]}
  - {name: extract_a, kind: shell, argv: ["true"]}
"""


def test_run_show_lists_tasks_in_dag_order(cli: Cli, tmp_path: Path) -> None:
    definition = tmp_path / "backwards.yaml"
    definition.write_text(DECLARED_BACKWARDS)
    cli.ok("job", "apply", str(definition))
    [run] = json.loads(cli.ok("run", "list", "-o", "json").stdout)["runs"]
    shown = at_width(cli, 120, "run", "show", run["id"]).stdout.splitlines()
    header = next(i for i, line in enumerate(shown) if line.split()[:1] == ["task"])
    names = [line.split()[0] for line in shown[header + 2 : header + 6]]
    assert set(names[:2]) == {"extract_a", "extract_b"}  # declared last, listed first
    assert names[2:] == ["transform", "load"]
