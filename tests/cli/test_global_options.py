"""Global options in any position, and one source of settings for every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.conftest import Cli, error_line
from tickwork.cli.common import CliDeps
from tickwork.cli.main import app
from tickwork.cli.options import hoist
from tickwork.sdk import Client


@pytest.mark.parametrize(
    ("args", "hoisted"),
    [
        (["job", "list", "--token", "X"], ["--token", "X", "job", "list"]),
        (["job", "--url=http://h", "list"], ["--url=http://h", "job", "list"]),
        (["run", "show", "R", "-o", "json"], ["-o", "json", "run", "show", "R"]),
        (["run", "show", "R", "-ojson"], ["-ojson", "run", "show", "R"]),
        (["job", "add", "a", "--now", "--", "cmd", "-o", "x"],
         ["job", "add", "a", "--now", "--", "cmd", "-o", "x"]),  # a task's own argv stays
        (["up", "--data-dir", "/d", "--port", "1"], ["--data-dir", "/d", "up", "--port", "1"]),
    ],
)  # fmt: skip
def test_hoist_moves_global_options_to_the_front(args: list[str], hoisted: list[str]) -> None:
    assert hoist(args) == hoisted


@pytest.mark.parametrize(
    "args",
    [
        ["--token", "nope", "job", "list"],
        ["job", "--token", "nope", "list"],
        ["job", "list", "--token", "nope"],
    ],
)
def test_token_works_in_any_position(cli: Cli, args: list[str]) -> None:
    line = error_line(cli(*args))
    assert "pass --token" in line  # the server refused the given token: it was sent


def test_output_works_before_the_command(cli: Cli) -> None:
    cli.ok("job", "add", "hello", "--now", "--", "true")
    listed = json.loads(cli.ok("-o", "json", "job", "list").stdout)
    assert [j["name"] for j in listed["jobs"]] == ["hello"]
    assert "name: hello" in cli.ok("job", "show", "hello", "-o", "yaml").stdout


def test_data_dir_is_where_the_token_is_read(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "admin.token").write_text("stale-token\n")
    assert "pass --token" in error_line(cli("job", "list", "--data-dir", str(tmp_path)))
    cli.ok("job", "list", "--data-dir", str(tmp_path / "none"))  # no file: no token sent


def test_client_url_and_token_come_from_the_config_file(tmp_path: Path) -> None:
    seen: list[tuple[str, str | None]] = []

    def make_client(url: str, token: str | None) -> Client:
        seen.append((url, token))
        return Client(url, token=token)

    config = tmp_path / "tickwork.toml"
    config.write_text('url = "http://127.0.0.1:1"\ntoken = "from-file"\n')
    result = CliRunner().invoke(
        app,
        ["job", "list", "--config", str(config)],
        obj=CliDeps(make_client),
        env={"TICKWORK_TOKEN": None, "TICKWORK_URL": None},
    )
    assert seen == [("http://127.0.0.1:1", "from-file")]
    assert result.exit_code == 1  # nothing listens on port 1
    result = CliRunner().invoke(
        app,
        ["job", "list", "--url", "http://127.0.0.1:2"],
        obj=CliDeps(make_client),
        env={"TICKWORK_CONFIG": str(config), "TICKWORK_TOKEN": "from-env"},
    )
    assert seen[1] == ("http://127.0.0.1:2", "from-env")  # option > environment > file


def test_a_bad_config_file_is_one_error_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("colour = 'blue'\n")
    result = CliRunner().invoke(app, ["job", "list", "--config", str(config)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: config.colour: unknown setting in ")


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["--autoscale", "8"], {}, "error: autoscale: must be MIN:MAX, such as 2:16, not '8'"),
        (["--autoscale", "0:4"], {}, "error: autoscale: MIN must be 1 or more, not 0"),
        (["--autoscale", "5:2"], {}, "error: autoscale: MAX must be MIN (5) or more, not 2"),
        (["--autoscale", "a:b"], {}, "error: autoscale: MIN and MAX must be whole numbers"),
        (["--autoscale", "1:4", "--concurrency", "2"], {}, "error: autoscale: give --autoscale"),
        ([], {"TICKWORK_AUTOSCALE": "4"}, "error: autoscale: must be MIN:MAX"),
    ],
)
def test_bad_autoscale_bounds_are_one_error_line_before_anything_starts(
    args: list[str], env: dict[str, str], line: str
) -> None:
    url = {"TICKWORK_DATABASE_URL": "postgresql://127.0.0.1:1/never-reached"}
    result = CliRunner().invoke(app, ["worker", *args], env={**url, **env})
    assert error_line(result).startswith(line)
