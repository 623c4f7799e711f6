"""``tickwork job ...`` through the CLI runner against the in-process API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.cli.conftest import Cli, error_line
from tickwork.cli.main import app


def _job(cli: Cli, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(cli.ok("job", "show", name, "-o", "json").stdout)
    return data


def test_job_add_cron_with_argv_command(cli: Cli) -> None:
    result = cli.ok(
        "job", "add", "backup", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
        "--", "pg_dump", "--verbose", "mydb",
    )  # fmt: skip
    assert "added job backup" in result.stdout
    job = _job(cli, "backup")
    assert job["schedule"] == {
        "kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
        "at": None, "start": None, "end": None,
    }  # fmt: skip
    [task] = job["tasks"]
    assert task["kind"] == "shell"
    assert task["config"]["argv"] == ["pg_dump", "--verbose", "mydb"]
    assert "command" not in task["config"]
    assert job["next_fire_at"] is not None


def test_job_add_shell_runs_the_command_as_one_string(cli: Cli) -> None:
    cli.ok(
        "job", "add", "piped", "--now", "--shell", "--env", "A=1", "--env", "B=x=y",
        "--cwd", "/tmp", "--", "echo $A | wc -c",
    )  # fmt: skip
    config = _job(cli, "piped")["tasks"][0]["config"]
    assert config["command"] == "echo $A | wc -c"
    assert config["shell"] is True
    assert config["env"] == {"A": "1", "B": "x=y"}
    assert config["cwd"] == "/tmp"


def test_job_add_at_with_http_task(cli: Cli) -> None:
    cli.ok(
        "job", "add", "ping", "--at", "2099-12-01T10:00:00Z", "--http", "get",
        "https://example.org/health", "--header", "X-Token: abc", "--body", "{}",
    )  # fmt: skip
    job = _job(cli, "ping")
    assert job["schedule"]["at"] == "2099-12-01T10:00:00Z"
    config = job["tasks"][0]["config"]
    assert (config["method"], config["url"]) == ("GET", "https://example.org/health")
    assert config["headers"] == {"X-Token": "***"}  # secret-looking: masked
    assert config["body"] == "{}"


def test_job_add_now_with_python_task_queues_a_run(cli: Cli) -> None:
    cli.ok(
        "job", "add", "hello", "--now", "--python", "tests.fixtures.tasks:hello",
        "--args", '{"name": "x"}', "--retries", "2", "--backoff", "5", "--timeout", "9",
        "--queue", "default", "--priority", "7", "--tag", "a", "--tag", "b",
    )  # fmt: skip
    job = _job(cli, "hello")
    task = job["tasks"][0]
    assert task["config"] == {"target": "tests.fixtures.tasks:hello", "kwargs": {"name": "x"}}
    assert job["retry"]["max_attempts"] == 3
    assert job["retry"]["initial_delay"] == 5
    assert (job["timeout"], job["priority"], job["tags"]) == (9, 7, ["a", "b"])
    runs = json.loads(cli.ok("run", "list", "--job", "hello", "-o", "json").stdout)["runs"]
    assert [r["state"] for r in runs] == ["queued"]


def test_job_list_prints_a_table_and_json(cli: Cli) -> None:
    cli.ok("job", "add", "b-job", "--cron", "0 9 * * MON-FRI", "--", "true")
    cli.ok("job", "add", "a-job", "--now", "--", "true")
    table = cli.ok("job", "list").stdout
    assert "a-job" in table and "b-job" in table and "cron 0 9 * * MON-FRI" in table
    data = json.loads(cli.ok("job", "list", "-o", "json").stdout)
    assert [j["name"] for j in data["jobs"]] == ["a-job", "b-job"]


def test_job_show_table_names_the_schedule_and_task(cli: Cli) -> None:
    cli.ok("job", "add", "backup", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--", "ls")
    out = cli.ok("job", "show", "backup").stdout
    assert "cron 30 2 * * * (Europe/Berlin)" in out
    assert "shell: ls" in out
    assert "+02:00" in out or "+01:00" in out  # upcoming fires in Berlin time


def test_job_pause_resume_trigger_delete(cli: Cli) -> None:
    cli.ok("job", "add", "c", "--cron", "0 0 * * *", "--", "true")
    assert "paused job c" in cli.ok("job", "pause", "c").stdout
    assert _job(cli, "c")["paused"] is True
    assert json.loads(cli.ok("job", "resume", "c", "-o", "json").stdout)["paused"] is False
    run = json.loads(cli.ok("job", "trigger", "c", "-o", "json").stdout)
    assert (run["trigger"], run["state"]) == ("manual", "queued")
    assert "deleted job c" in cli.ok("job", "delete", "c").stdout
    assert error_line(cli("job", "show", "c")) == "error: no job 'c'"


BAD_ADDS: dict[str, tuple[list[str], str]] = {
    "two schedules": (["--now", "--cron", "* * * * *", "--", "true"], "error: schedule: "),
    "no schedule": (["--", "true"], "error: schedule: "),
    "no task": (["--now"], "error: task: "),
    "two tasks": (["--now", "--python", "m:f", "--", "true"], "error: task: "),
    "bad args json": (["--now", "--python", "m:f", "--args", "{nope"], "error: task.kwargs: "),
    "args not an object": (["--now", "--python", "m:f", "--args", "[1]"], "error: task.kwargs: "),
    "bad env": (["--now", "--env", "NOEQUALS", "--", "true"], "error: task.env: "),
    "tz without cron": (["--now", "--tz", "UTC", "--", "true"], "error: schedule: "),
    "invalid cron": (["--cron", "61 * * * *", "--", "true"], "error: schedule.cron: "),
    "unknown zone": (
        ["--cron", "0 0 * * *", "--tz", "Mars/Base", "--", "true"], "error: schedule.timezone: "
    ),
    "at in the past": (["--at", "2001-01-01T00:00:00Z", "--", "true"], "error: schedule.at: "),
    "at not a date": (["--at", "tomorrow", "--", "true"], "error: schedule.at: "),
    "jitter without cron": (["--now", "--jitter", "60", "--", "true"], "error: schedule: "),
    "negative jitter": (
        ["--cron", "0 * * * *", "--jitter", "-1", "--", "true"], "error: jitter: must be from 0"
    ),
    "jitter over a week": (
        ["--cron", "0 * * * *", "--jitter", "1e7", "--", "true"], "error: jitter: must be from 0"
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_ADDS))
def test_job_add_bad_input_prints_one_error_line_and_creates_nothing(cli: Cli, case: str) -> None:
    args, prefix = BAD_ADDS[case]
    line = error_line(cli("job", "add", "j", *args))
    assert line.startswith(prefix), line
    assert json.loads(cli.ok("job", "list", "-o", "json").stdout)["jobs"] == []


def test_job_add_past_at_is_accepted_with_allow_past(cli: Cli) -> None:
    cli.ok("job", "add", "late", "--at", "2001-01-01T00:00:00Z", "--allow-past", "--", "true")
    runs = json.loads(cli.ok("run", "list", "-o", "json").stdout)["runs"]
    assert [r["logical_date"] for r in runs] == ["2001-01-01T00:00:00Z"]


def test_job_add_duplicate_name_is_an_error_line(cli: Cli) -> None:
    cli.ok("job", "add", "dup", "--cron", "0 0 * * *", "--", "true")
    assert error_line(cli("job", "add", "dup", "--now", "--", "true")).startswith("error: name: ")


def test_unreachable_server_is_one_error_line() -> None:
    result = CliRunner().invoke(app, ["job", "list", "--url", "http://127.0.0.1:9"])
    assert "cannot reach tickwork at http://127.0.0.1:9" in error_line(result)


def test_url_comes_from_tickwork_url_when_not_given() -> None:
    result = CliRunner().invoke(app, ["run", "list"], env={"TICKWORK_URL": "http://127.0.0.1:9"})
    assert "http://127.0.0.1:9" in error_line(result)


def test_job_enqueue_with_params_count_and_file(cli: Cli, tmp_path: Any) -> None:
    cli.ok(
        "job", "add", "w", "--cron", "0 3 * * *", "--python", "m:f", "--args", '{"a": 1}',
        "--param", "b:integer", "--param", "n:integer=0", "--run-scope", "write",
    )  # fmt: skip
    shown = json.loads(cli.ok("job", "show", "w", "-o", "json").stdout)["params"]
    assert shown["properties"]["n"] == {"type": "integer", "default": 0}
    assert shown["scope"] == "write"
    refused = cli("job", "enqueue", "w", "--params", '{"a": 2}')
    assert error_line(refused).startswith("error: items[0].params.a: is not a declared param")
    one = json.loads(cli.ok("job", "enqueue", "w", "--params", '{"b": 2}', "-o", "json").stdout)
    assert len(one["run_ids"]) == 1
    assert "enqueued run " in cli.ok("job", "enqueue", "w").stdout
    assert "enqueued 3 runs of w" in cli.ok("job", "enqueue", "w", "--count", "3").stdout
    lines = tmp_path / "runs.jsonl"
    lines.write_text('{"n": 1}\n\n{"n": 2}\n')
    many = json.loads(cli.ok("job", "enqueue", "w", "--from-file", str(lines), "-o", "json").stdout)
    runs = json.loads(cli.ok("run", "list", "--job", "w", "-o", "json").stdout)["runs"]
    assert len(runs) == 7 and {r["trigger"] for r in runs} == {"enqueue"}
    detail = json.loads(cli.ok("run", "show", many["run_ids"][1], "-o", "json").stdout)
    assert detail["task_runs"][0]["config"]["kwargs"] == {"a": 1, "n": 2}
    first = json.loads(cli.ok("run", "show", one["run_ids"][0], "-o", "json").stdout)
    assert first["task_runs"][0]["config"]["kwargs"] == {"a": 1, "b": 2, "n": 0}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["w", "--params", "{nope"], "error: --params: not valid JSON"),
        (["w", "--params", "[1]"], "error: --params: must be a JSON object"),
        (["nope"], "error: no job 'nope'"),
        (
            ["w", "--priority", "7", "--from-file", "/no/such/file"],
            "error: --from-file: cannot read",
        ),
        (["w", "--count", "2", "--from-file", "x"], "error: --from-file: give either"),
    ],
)
def test_job_enqueue_bad_input_is_one_line(cli: Cli, args: list[str], expected: str) -> None:
    cli.ok("job", "add", "w", "--cron", "0 3 * * *", "--python", "m:f")
    assert error_line(cli("job", "enqueue", *args)).startswith(expected)


def test_job_enqueue_bad_line_of_a_file_names_the_line(cli: Cli, tmp_path: Any) -> None:
    cli.ok("job", "add", "w", "--cron", "0 3 * * *", "--python", "m:f")
    lines = tmp_path / "runs.jsonl"
    lines.write_text('{"n": 1}\n"text"\n')
    assert error_line(cli("job", "enqueue", "w", "--from-file", str(lines))) == (
        f"error: {lines}:2: must be a JSON object, e.g. '{{\"user\": 42}}'"
    )
    assert json.loads(cli.ok("run", "list", "--job", "w", "-o", "json").stdout)["runs"] == []
