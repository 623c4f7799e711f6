"""``tickwork job apply FILE | module:attr``: created, updated, unchanged; one error line else."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.etl import etl
from tests.cli.conftest import Cli, error_line
from tickwork.sdk.definitions import job_body, load_definition

ROOT = Path(__file__).resolve().parents[2]
ETL_YAML = ROOT / "examples" / "etl.yaml"

FLOW = """\
name: flow
schedule: now
tasks:
  - {name: a, kind: shell, argv: [echo, a]}
  - {name: b, kind: shell, argv: [echo, b], upstream: [a], trigger_rule: all_done}
"""


def _job(cli: Cli, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(cli.ok("job", "show", name, "-o", "json").stdout)
    return data


def _runs(cli: Cli, name: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(
        cli.ok("run", "list", "--job", name, "-o", "json").stdout
    )["runs"]
    return runs


def test_applying_a_yaml_file_twice_creates_then_changes_nothing(cli: Cli) -> None:
    cli.ok("pool", "set", "db", "--slots", "2")
    created = cli.ok("job", "apply", str(ETL_YAML))
    assert created.stdout.strip() == "created job etl"
    first = _job(cli, "etl")
    assert [t["name"] for t in first["tasks"]] == [
        "extract_users",
        "extract_orders",
        "join",
        "aggregate",
        "load",
    ]
    assert first["tasks"][2]["upstream"] == ["extract_users", "extract_orders"]
    assert first["max_active_runs"] == 1
    again = cli.ok("job", "apply", str(ETL_YAML))
    assert again.stdout.strip() == "unchanged job etl"
    assert _job(cli, "etl") == first


def test_the_python_form_is_the_same_job_as_the_yaml_form(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    cli.ok("pool", "set", "db", "--slots", "2")
    assert cli.ok("job", "apply", "examples.etl:etl").stdout.strip() == "created job etl"
    assert cli.ok("job", "apply", str(ETL_YAML)).stdout.strip() == "unchanged job etl"


def test_a_changed_file_updates_the_job_for_future_runs_only(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(FLOW)
    assert cli.ok("job", "apply", str(path)).stdout.strip() == "created job flow"
    [run] = _runs(cli, "flow")
    path.write_text(FLOW.replace("[echo, a]", "[echo, A]"))
    assert cli.ok("job", "apply", str(path)).stdout.strip() == "updated job flow"
    assert _job(cli, "flow")["tasks"][0]["config"]["argv"] == ["echo", "A"]
    assert [r["id"] for r in _runs(cli, "flow")] == [run["id"]]
    detail = json.loads(cli.ok("run", "show", run["id"], "-o", "json").stdout)
    configs = {tr["task_name"]: tr["config"] for tr in detail["task_runs"]}
    assert configs["a"]["argv"] == ["echo", "a"]
    assert cli.ok("job", "apply", str(path)).stdout.strip() == "unchanged job flow"


def test_a_json_file_applies_too_and_prints_json_on_request(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "flow.json"
    definition = {
        "name": "flow",
        "schedule": "*/5 * * * *",
        "tasks": [{"name": "a", "kind": "http", "url": "https://example.org/a"}],
    }
    path.write_text(json.dumps(definition))
    applied = json.loads(cli.ok("job", "apply", str(path), "-o", "json").stdout)
    assert applied["outcome"] == "created"
    assert applied["job"]["schedule"]["cron"] == "*/5 * * * *"


def _bad(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("bad.yaml", "name: x\ntasks: [a\n", "invalid YAML: "),
        ("bad.json", '{"name": "x",}', "invalid JSON at line 1, column 14: "),
        ("list.yaml", "- a\n- b\n", "workflow: must be an object with name, schedule and tasks"),
        ("empty.yaml", "name: flow\nschedule: now\ntasks: []\n", "tasks: a workflow needs"),
        (
            "cycle.yaml",
            FLOW.replace("argv: [echo, a]}", "argv: [echo, a], upstream: [b]}"),
            "tasks: the tasks form a cycle (a -> b -> a); upstreams must form a DAG",
        ),
        (
            "ghost.yaml",
            FLOW.replace("upstream: [a]", "upstream: [a, ghost]"),
            "tasks[1].upstream: 'ghost' is not another task of this job; name one of ['a', 'b'] "
            "(task 'b')",
        ),
        (
            "twice.yaml",
            FLOW.replace("name: b,", "name: a,").replace("upstream: [a]", "upstream: []"),
            "tasks[1].name: 'a' is used twice",
        ),
        (
            "hook.yaml",
            FLOW + "callbacks: {on_failure: {kind: http, url: nowhere}}\n",
            "callbacks.on_failure.url: must be an http:// or https:// URL",
        ),
        (
            "slots.yaml",
            FLOW.replace("trigger_rule: all_done", "pool: db, pool_slots: 0"),
            "tasks[1].pool_slots: must be a whole number of 1 or more (task 'b')",
        ),
        (
            "pool.yaml",
            FLOW.replace("trigger_rule: all_done", "pool: db"),
            "tasks[1].pool: no pool 'db'; create it first with `tickwork pool set db --slots N`",
        ),
        (
            "cron.yaml",
            FLOW.replace("schedule: now", "schedule: '61 * * * *'"),
            "schedule.cron: ",
        ),
    ],
)
def test_a_bad_definition_is_one_line_naming_the_file_and_field_and_writes_nothing(
    cli: Cli, tmp_path: Path, name: str, text: str, says: str
) -> None:
    source = _bad(tmp_path, name, text)
    line = error_line(cli("job", "apply", source))
    assert line.startswith(f"error: {source}: {says}"), line
    assert cli.ok("job", "list").stdout.strip() == "no jobs"


@pytest.fixture
def pipeline_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory holding a module with a workflow, as the current directory."""
    (tmp_path / "mypipe.py").write_text(
        "import tickwork\n\n"
        "@tickwork.task\n"
        "def step() -> int:\n"
        "    return 1\n\n"
        "@tickwork.workflow(schedule='0 3 * * *')\n"
        "def flow() -> None:\n"
        "    step()\n\n"
        "NOT_A_WORKFLOW = 3\n"
        "AS_DATA = {'name': 'data', 'schedule': 'now', 'tasks': [\n"
        "    {'name': 'x', 'kind': 'http', 'url': 'https://example.org/x'}]}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    yield tmp_path
    sys.modules.pop("mypipe", None)


def test_a_module_source_is_imported_from_the_current_directory(
    cli: Cli, pipeline_dir: Path
) -> None:
    assert cli.ok("job", "apply", "mypipe:flow").stdout.strip() == "created job flow"
    [task] = _job(cli, "flow")["tasks"]
    assert (task["kind"], task["config"]["target"]) == ("python", "mypipe:step")
    assert cli.ok("job", "apply", "mypipe:AS_DATA").stdout.strip() == "created job data"
    assert cli.ok("job", "apply", "mypipe:flow").stdout.strip() == "unchanged job flow"


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("mypipe:nope", "error: mypipe:nope: module mypipe has no attribute 'nope'"),
        (
            "mypipe:NOT_A_WORKFLOW",
            "error: mypipe:NOT_A_WORKFLOW: NOT_A_WORKFLOW is a int; name a @workflow function",
        ),
        (
            "nosuch.pipes:flow",
            "error: nosuch.pipes:flow: cannot import nosuch.pipes: ModuleNotFoundError: ",
        ),
        ("missing.yaml", "error: missing.yaml: no such file (nor a module.path:attr)"),
    ],
)
def test_a_source_that_cannot_be_loaded_is_one_error_line(
    cli: Cli, pipeline_dir: Path, source: str, says: str
) -> None:
    assert error_line(cli("job", "apply", source)).startswith(says)
    assert cli.ok("job", "list").stdout.strip() == "no jobs"


def test_apply_by_the_cli_and_by_the_sdk_agree(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    cli.ok("pool", "set", "db", "--slots", "2")
    with cli.deps.make_client("http://t.test", None) as client:
        assert client.apply_job(etl)["outcome"] == "created"
        assert cli.ok("job", "apply", str(ETL_YAML)).stdout.strip() == "unchanged job etl"
        assert client.apply_job(load_definition(str(ETL_YAML)))["outcome"] == "unchanged"
        changed = load_definition(str(ETL_YAML))
        assert client.apply_job({**job_body(changed), "priority": 5})["outcome"] == "updated"
        assert cli.ok("job", "apply", "examples.etl:etl").stdout.strip() == "updated job etl"


def test_job_show_and_list_describe_a_workflow(cli: Cli) -> None:
    cli.ok("pool", "set", "db", "--slots", "2")
    cli.ok("job", "apply", str(ETL_YAML))
    shown = cli.ok("job", "show", "etl").stdout
    assert "workflow of 5 tasks" in shown
    assert "max active runs  1" in shown
    nodes = [line.strip() for line in shown.splitlines() if line.startswith("  ")]
    assert nodes == [
        "extract_users [python: examples.etl:extract_users] pool db",
        "extract_orders [python: examples.etl:extract_orders] pool db",
        "join [python: examples.etl:join] <- extract_users, extract_orders",
        "aggregate [python: examples.etl:aggregate] <- join",
        "load [python: examples.etl:load] <- aggregate",
    ]
    listed = cli.ok("job", "list").stdout
    assert "workflow of 5 tasks" in listed
