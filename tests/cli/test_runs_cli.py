"""``tickwork run ...`` and ``tickwork schedule preview`` through the CLI runner."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime

from tests.cli.conftest import Cli, error_line
from tickwork.core.jitter import due_at
from tickwork.core.model import LogChunk
from tickwork.hooks import CallbackErrorLog


def _only_run(cli: Cli) -> dict[str, str]:
    [run] = json.loads(cli.ok("run", "list", "-o", "json").stdout)["runs"]
    return dict(run)


def test_run_list_and_show_in_table_and_json(cli: Cli) -> None:
    cli.ok("job", "add", "hello", "--now", "--", "echo", "hi")
    run = _only_run(cli)
    assert run["job_name"] == "hello"
    listed = cli.ok("run", "list").stdout
    assert run["id"][-8:] in listed and run["id"] not in listed and "• queued" in listed
    assert run["id"] in cli.ok("run", "list", "-o", "wide").stdout
    detail = json.loads(cli.ok("run", "show", run["id"], "-o", "json").stdout)
    assert detail["task_runs"][0]["state"] == "queued"
    shown = cli.ok("run", "show", run["id"][-8:]).stdout  # the short id of the table
    assert "hello" in shown and "main" in shown and "1/1" in shown


def test_run_list_filters_by_state_and_job(cli: Cli) -> None:
    cli.ok("job", "add", "a", "--now", "--", "true")
    cli.ok("job", "add", "b", "--at", "2099-01-01T00:00:00Z", "--", "true")
    scheduled = json.loads(cli.ok("run", "list", "--state", "scheduled", "-o", "json").stdout)
    assert [r["job_name"] for r in scheduled["runs"]] == ["b"]
    by_job = json.loads(cli.ok("run", "list", "--job", "a", "-o", "json").stdout)
    assert [r["job_name"] for r in by_job["runs"]] == ["a"]
    assert error_line(cli("run", "list", "--state", "sleepy")).startswith("error: state: ")
    assert error_line(cli("run", "list", "--job", "nope")) == "error: no job 'nope'"


def test_run_list_job_finds_a_deleted_job_s_history(cli: Cli) -> None:
    cli.ok("job", "add", "gone", "--now", "--", "true")
    run_id = _only_run(cli)["id"]
    cli.ok("job", "delete", "gone")
    assert error_line(cli("job", "show", "gone")) == "error: no job 'gone'"
    listed = json.loads(cli.ok("run", "list", "--job", "gone", "-o", "json").stdout)["runs"]
    assert [(r["id"], r["job_name"], r["state"]) for r in listed] == [(run_id, "gone", "cancelled")]
    assert run_id[-8:] in cli.ok("run", "list", "--job", "gone").stdout


def test_run_cancel_then_retry(cli: Cli) -> None:
    cli.ok("job", "add", "a", "--now", "--", "true")
    run_id = _only_run(cli)["id"]
    assert "cancelled" in cli.ok("run", "cancel", run_id).stdout
    retried = json.loads(cli.ok("run", "retry", run_id, "-o", "json").stdout)
    assert retried["task_runs"][0]["attempt"] == 2
    line = error_line(cli("run", "retry", run_id))
    assert line.startswith("error: run: ")


def test_run_cancel_and_retry_one_task_with_task(cli: Cli) -> None:
    cli.ok("job", "add", "a", "--now", "--", "true")
    run_id = _only_run(cli)["id"]
    said = cli.ok("run", "cancel", run_id, "--task", "main").stdout
    assert said.strip() == f"cancel requested for task main of run {run_id} (cancelled, attempt 1)"
    retried = json.loads(cli.ok("run", "retry", run_id, "--task", "main", "-o", "json").stdout)
    assert (retried["id"], retried["task_runs"][0]["state"]) == (run_id, "scheduled")
    line = error_line(cli("run", "retry", run_id, "--task", "main"))
    assert line.startswith("error: task_run: task run ")
    assert line.endswith(" is scheduled; only cancelled, failed, upstream_failed can be retried")


def test_run_cancel_of_an_unknown_task_names_the_tasks(cli: Cli) -> None:
    cli.ok("job", "add", "a", "--now", "--", "true")
    run_id = _only_run(cli)["id"]
    line = error_line(cli("run", "cancel", run_id, "--task", "other"))
    assert line == "error: task: name one of the run's tasks: main"
    assert json.loads(cli.ok("run", "show", run_id, "-o", "json").stdout)["state"] == "queued"
    assert error_line(cli("run", "retry", "nope", "--task", "main")).startswith(
        "error: no run 'nope'"
    )


def test_run_show_of_an_unknown_id_is_an_error_line(cli: Cli) -> None:
    assert error_line(cli("run", "show", "nope")).startswith("error: no run 'nope'")


def test_run_logs_prints_stdout_and_stderr_chunks(cli: Cli) -> None:
    cli.ok("job", "add", "a", "--now", "--", "true")
    run_id = _only_run(cli)["id"]
    detail = json.loads(cli.ok("run", "show", run_id, "-o", "json").stdout)
    _append(cli, detail["task_runs"][0]["id"], [("stdout", "out 1\n"), ("stderr", "err 1\n")])
    result = cli.ok("run", "logs", run_id)
    assert result.stdout == "out 1\n"
    assert result.stderr == "err 1\n"


def test_run_logs_shows_a_failed_callback_after_the_output_on_stderr(cli: Cli) -> None:
    cli.ok("job", "add", "a", "--now", "--", "true")
    run_id = _only_run(cli)["id"]
    detail = json.loads(cli.ok("run", "show", run_id, "-o", "json").stdout)
    task_run_id = detail["task_runs"][0]["id"]
    _append(cli, task_run_id, [("stdout", "out 1\n"), ("stderr", "err 1\n")])

    async def callback_failed() -> None:  # as Hooks reports it, on the server's loop
        error_log = CallbackErrorLog(cli.store, lambda: datetime.now(UTC))
        error_log(task_run_id, 1, "on_success callback failed: timed out after 10 s")
        await error_log.flush(5.0)

    cli.portal.call(callback_failed)
    result = cli.ok("run", "logs", run_id)
    assert result.stdout == "out 1\n"
    assert result.stderr == "err 1\non_success callback failed: timed out after 10 s\n"


def test_run_logs_follow_prints_everything_and_stops_when_the_run_is_finished(cli: Cli) -> None:
    cli.ok("job", "add", "a", "--now", "--", "true")
    run_id = _only_run(cli)["id"]
    detail = json.loads(cli.ok("run", "show", run_id, "-o", "json").stdout)
    # More chunks than one page, so --follow has to poll on with after_seq.
    _append(cli, detail["task_runs"][0]["id"], [("stdout", f"{i}\n") for i in range(1500)])
    cli.ok("run", "cancel", run_id)
    result = cli.ok("run", "logs", run_id, "--follow")
    assert result.stdout == "".join(f"{i}\n" for i in range(1500))


def test_schedule_preview_prints_local_and_utc_without_a_server(cli: Cli) -> None:
    args = ["schedule", "preview", "0 9 * * MON-FRI", "--tz", "America/New_York"]
    data = json.loads(
        cli.ok(*args, "--count", "2", "--from", "2026-06-05T00:00:00Z", "-o", "json").stdout
    )
    assert data["fires"] == [
        {
            "utc": "2026-06-05T13:00:00Z",
            "local": "2026-06-05T09:00:00-04:00",
            "due": "2026-06-05T13:00:00Z",
        },
        {
            "utc": "2026-06-08T13:00:00Z",
            "local": "2026-06-08T09:00:00-04:00",
            "due": "2026-06-08T13:00:00Z",
        },
    ]
    table = cli.ok(*args, "--count", "3", "--from", "2026-06-05T00:00:00Z").stdout
    assert "Fri 2026-06-05 09:00 EDT" in table and "2026-06-09T13:00:00Z" in table
    assert json.loads(cli.ok("job", "list", "-o", "json").stdout)["jobs"] == []


def test_schedule_preview_with_jitter_shows_each_runs_due_instant(cli: Cli) -> None:
    args = ["schedule", "preview", "*/5 * * * *", "--from", "2026-06-05T00:00:00Z"]
    spread = [*args, "--count", "3", "--jitter", "600", "--job", "nightly"]
    fires = json.loads(cli.ok(*spread, "-o", "json").stdout)["fires"]
    for fire, following in itertools.pairwise(fires):
        logical = datetime.fromisoformat(fire["utc"])
        expected = due_at("nightly", logical, 600, datetime.fromisoformat(following["utc"]))
        assert datetime.fromisoformat(fire["due"]) == expected  # before the next fire
    table = cli.ok(*spread).stdout
    assert "due (UTC)" in table and fires[0]["due"] in table
    bad = error_line(cli(*args, "--jitter", "-5"))
    assert bad.startswith("error: jitter: must be from 0")


def test_schedule_preview_bad_input_is_one_error_line(cli: Cli) -> None:
    bad_cron = error_line(cli("schedule", "preview", "0 9 * *"))
    assert bad_cron.startswith("error: schedule.cron: ")
    bad_zone = error_line(cli("schedule", "preview", "0 9 * * *", "--tz", "Nowhere/X"))
    assert bad_zone.startswith("error: schedule.timezone: ")
    bad_from = error_line(cli("schedule", "preview", "0 9 * * *", "--from", "2026-06-05"))
    assert bad_from.startswith("error: from: ")


def _append(cli: Cli, task_run_id: str, chunks: list[tuple[str, str]]) -> None:
    now = datetime.now(UTC)
    records = [
        LogChunk(task_run_id, 1, seq, stream, data, now)
        for seq, (stream, data) in enumerate(chunks)
    ]
    cli.portal.call(cli.store.append_logs, records)


def test_empty_lists_say_so(cli: Cli) -> None:
    assert cli.ok("run", "list").stdout.strip() == "no runs"
    assert cli.ok("job", "list").stdout.strip() == "no jobs"
