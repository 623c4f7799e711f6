"""``tickwork run why`` and ``tickwork job why`` through the CLI runner."""

from __future__ import annotations

import json

from tests.cli.conftest import Cli, error_line


def test_run_and_job_why_print_sentences(cli: Cli) -> None:
    cli.ok("job", "add", "later", "--at", "2099-01-02T03:04:05Z", "--", "true")
    run = json.loads(cli.ok("run", "list", "--job", "later", "-o", "json").stdout)["runs"][0]
    said = cli.ok("run", "why", run["id"]).stdout.strip()
    assert said.startswith("task main is not due until 2099-01-02 03:04:05Z (in ")
    cli.ok("job", "pause", "later")
    assert "job 'later' is paused" in cli.ok("job", "why", "later").stdout
    assert (
        json.loads(cli.ok("run", "why", run["id"], "-o", "json").stdout)["reasons"][0]["code"]
        == "job_paused"
    )
    assert "no run 'nope'" in error_line(cli("run", "why", "nope"))


def test_job_ledger_prints_ticks_and_counts(cli: Cli) -> None:
    cli.ok("job", "add", "daily", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--", "true")
    span = ("--from", "2099-03-28T00:00:00Z", "--to", "2099-03-30T00:00:00Z")
    out = cli.ok("job", "ledger", "daily", *span).stdout
    assert "2 upcoming" in out and "upcoming" in out
