"""Shell completion from the server: job names, run ids and pool names, asked the way bash's
completion hook asks (``_TICKWORK_COMPLETE=complete_bash``, the words typed so far)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tests.cli.conftest import Cli
from tickwork.cli.common import CliDeps
from tickwork.cli.main import app
from tickwork.sdk import Client


def completions(deps: CliDeps, args: list[str], incomplete: str) -> list[str]:
    words = " ".join(["tickwork", *args, incomplete])
    env = {"_TICKWORK_COMPLETE": "complete_bash", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(len(args) + 1)
    result = CliRunner().invoke(app, [], obj=deps, prog_name="tickwork", env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout.split()


def test_job_names_complete_by_prefix(cli: Cli) -> None:
    for name in ("nightly", "noon", "hourly"):
        cli.ok("job", "add", name, "--at", "2099-01-01T00:00:00Z", "--", "true")
    assert sorted(completions(cli.deps, ["job", "show"], "n")) == ["nightly", "noon"]
    assert completions(cli.deps, ["job", "show"], "x") == []


def test_run_ids_complete_by_whole_or_short_id(cli: Cli) -> None:
    cli.ok("job", "add", "a", "--now", "--", "true")
    [run] = json.loads(cli.ok("run", "list", "-o", "json").stdout)["runs"]
    assert completions(cli.deps, ["run", "show"], run["id"][:6]) == [run["id"]]
    assert completions(cli.deps, ["run", "show"], run["id"][-8:-3]) == [run["id"][-8:]]


def test_pool_names_complete(cli: Cli) -> None:
    cli.ok("pool", "set", "db", "--slots", "2")
    cli.ok("pool", "set", "gpu", "--slots", "1")
    assert completions(cli.deps, ["pool", "delete"], "d") == ["db"]


def test_a_server_that_does_not_answer_completes_nothing(cli: Cli) -> None:
    cli.ok("job", "add", "nightly", "--at", "2099-01-01T00:00:00Z", "--", "true")
    away = CliDeps(make_client=lambda url, token: Client("http://127.0.0.1:9", timeout=0.5))
    assert completions(away, ["job", "show"], "n") == []
