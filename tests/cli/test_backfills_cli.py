"""``tickwork backfill ...`` through the CLI runner, against the in-process server."""

from __future__ import annotations

import json

from tests.cli.conftest import Cli, error_line


def _add_daily(cli: Cli) -> None:
    cli.ok("job", "add", "daily", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--", "true")


def test_dry_run_prints_dates_in_the_jobs_zone_and_writes_nothing(cli: Cli) -> None:
    _add_daily(cli)
    result = cli.ok(
        "backfill", "create", "daily", "--from", "2026-03-01", "--to", "2026-03-03", "--dry-run"
    )
    assert "3 dates" in result.stdout and "Nothing was written" in result.stdout
    assert result.stdout.count("create") == 3
    assert "no backfills" in cli.ok("backfill", "list").stdout


def test_create_list_show_pause_resume_cancel_watch(cli: Cli) -> None:
    _add_daily(cli)
    made = cli.ok(
        "backfill", "create", "daily", "--from", "2026-03-01", "--to", "2026-03-10",
        "--mode", "chunked", "--chunk-size", "3", "-o", "json",
    )  # fmt: skip
    backfill = json.loads(made.stdout)
    bid = backfill["id"]
    assert backfill["progress"]["total"] == 10 and backfill["mode"] == "chunked"
    assert bid in cli.ok("backfill", "list").stdout
    shown = cli.ok("backfill", "show", bid).stdout
    assert "0 of 10" in shown and "chunks of 3" in shown and "unknown yet" in shown
    assert "paused backfill" in cli.ok("backfill", "pause", bid).stdout
    assert "resumed backfill" in cli.ok("backfill", "resume", bid).stdout
    assert "cancelled backfill" in cli.ok("backfill", "cancel", bid, "--kill").stdout
    watched = cli.ok("backfill", "watch", bid).stdout  # ended: one frame, then it returns
    assert "daily" in watched and "0/10" in watched and "cancelled" in watched


def test_errors_are_one_line(cli: Cli) -> None:
    _add_daily(cli)
    line = error_line(
        cli(
            "backfill",
            "create",
            "daily",
            "--from",
            "2026-03-01",
            "--to",
            "2026-03-02",
            "--mode",
            "fast",
        )
    )
    assert "mode" in line
    assert "no backfill 'nope'" in error_line(cli("backfill", "show", "nope"))
    cli.ok("backfill", "create", "daily", "--from", "2026-03-01", "--to", "2026-03-02")
    line = error_line(
        cli("backfill", "create", "daily", "--from", "2026-03-02", "--to", "2026-03-04")
    )
    assert line.startswith("error: range: backfill ")
