"""End to end: `tickwork up` as a real process, driven through the real CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Cli, Server, wait_for

pytestmark = pytest.mark.slow
FINISHED = {"success", "failed", "cancelled"}


def only_run(cli: Cli, job: str) -> dict[str, Any]:
    runs = cli.json("run", "list", "--job", job)["runs"]
    assert len(runs) == 1, runs
    return dict(runs[0])


def finished_run(cli: Cli, job: str, timeout: float = 20.0) -> dict[str, Any]:
    return dict(
        wait_for(lambda: cli.json("run", "list", "--job", job)["runs"],
                 lambda runs: len(runs) == 1 and runs[0]["state"] in FINISHED,
                 timeout)[0]
    )  # fmt: skip


def test_now_at_and_cron_jobs_run_and_show_their_logs(cli: Cli) -> None:
    cli("job", "add", "tick", "--cron", "* * * * *", "--tz", "Europe/Berlin", "--", "echo", "tock")
    cli("job", "add", "hello", "--now", "--", "echo", "hello from tickwork")
    cli("job", "add", "greet", "--now", "--python", "tickwork.examples:hello",
        "--args", '{"name": "Ada"}')  # fmt: skip
    # 10 s ahead: a CLI start takes 2-3 s on a loaded 2-core machine (2 s made the test flaky);
    # the test waits for the next cron minute anyway.
    at = (datetime.now(UTC) + timedelta(seconds=10)).isoformat()
    cli("job", "add", "later", "--at", at, "--", "sh", "-c", "echo at $TICKWORK_LOGICAL_DATE")

    hello = finished_run(cli, "hello")
    assert hello["state"] == "success"
    assert "hello from tickwork" in cli("run", "logs", hello["id"]).stdout
    greet = finished_run(cli, "greet")
    assert greet["state"] == "success"
    assert "hello, Ada" in cli("run", "logs", greet["id"]).stdout

    later = finished_run(cli, "later")
    assert later["state"] == "success"
    started = datetime.fromisoformat(later["started_at"])
    assert started >= datetime.fromisoformat(at)
    assert "at " in cli("run", "logs", later["id"]).stdout

    # Every minute fires: on a loaded machine more than one may have by now; the first to
    # finish is the one looked at.
    ticks = wait_for(lambda: cli.json("run", "list", "--job", "tick")["runs"],
                     lambda runs: any(r["state"] in FINISHED for r in runs), 70)  # fmt: skip
    tick = next(r for r in ticks if r["state"] in FINISHED)
    assert tick["state"] == "success" and tick["trigger"] == "schedule"
    assert datetime.fromisoformat(tick["logical_date"]).second == 0
    assert "tock" in cli("run", "logs", tick["id"]).stdout
    names = {j["name"] for j in cli.json("job", "list")["jobs"]}
    assert names == {"tick", "hello", "greet", "later"}


def test_logs_follow_streams_until_the_run_finishes(cli: Cli) -> None:
    script = "for i in 1 2 3; do echo line$i; sleep 0.3; done"
    cli("job", "add", "chatty", "--now", "--", "sh", "-c", script)
    run = wait_for(lambda: cli.json("run", "list", "--job", "chatty")["runs"], bool)[0]

    followed = cli("run", "logs", run["id"], "--follow")

    assert [ln for ln in followed.stdout.splitlines() if ln.startswith("line")] == [
        "line1", "line2", "line3"]  # fmt: skip
    assert only_run(cli, "chatty")["state"] == "success"


def test_cancel_kills_a_running_shell_task(cli: Cli) -> None:
    cli("job", "add", "nap", "--now", "--", "sleep", "60")
    run = wait_for(lambda: cli.json("run", "list", "--job", "nap")["runs"],
                   lambda runs: runs and runs[0]["state"] == "running")[0]  # fmt: skip

    cli("run", "cancel", run["id"])

    assert finished_run(cli, "nap", timeout=5)["state"] == "cancelled"


def test_dead_letter_then_manual_retry(cli: Cli, tmp_path: Path) -> None:
    flag = tmp_path / "fixed"
    cli("job", "add", "flaky", "--now", "--retries", "1", "--backoff", "0.1", "--",
        "sh", "-c", f"test -e {flag}")  # fmt: skip
    dead = finished_run(cli, "flaky")
    assert dead["state"] == "failed"
    assert [r["id"] for r in cli.json("run", "list", "--state", "dead")["runs"]] == [dead["id"]]

    flag.touch()
    cli("run", "retry", dead["id"])

    assert finished_run(cli, "flaky")["state"] == "success"
    assert cli.json("run", "list", "--state", "dead")["runs"] == []


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--cron", "61 * * * *", "--", "true"], "schedule.cron"),
        (["--cron", "0 * * * *", "--tz", "Mars/Olympus", "--", "true"], "schedule.timezone"),
        (["--at", "2001-01-01T00:00:00Z", "--", "true"], "schedule.at"),
        (["--now", "--python", "m:f", "--args", "{not json"], "args"),
        (["--now"], "task"),
    ],
)
def test_bad_input_is_one_error_line_and_creates_nothing(
    cli: Cli, args: list[str], field: str
) -> None:
    done = cli("job", "add", "bad", *args, check=False)

    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and field in lines[0], done.stderr
    assert cli.json("job", "list")["jobs"] == []


def test_duplicate_job_name_is_refused(cli: Cli) -> None:
    cli("job", "add", "once", "--cron", "0 3 * * *", "--", "true")
    done = cli("job", "add", "once", "--now", "--", "true", check=False)
    assert done.returncode != 0 and "name" in done.stderr
    assert [j["schedule"]["kind"] for j in cli.json("job", "list")["jobs"]] == ["cron"]


def test_kill_9_mid_task_then_restart_retries_it_without_doubling(
    server: Server, cli: Cli, tmp_path: Path
) -> None:
    marker = tmp_path / "first-attempt"
    script = f"if [ -e {marker} ]; then echo second attempt; else touch {marker}; sleep 60; fi"
    cli("job", "add", "survivor", "--now", "--retries", "1", "--", "sh", "-c", script)
    wait_for(marker.exists, bool)

    server.kill9()
    server.start()

    run = finished_run(cli, "survivor", timeout=30)
    assert run["state"] == "success"
    detail = cli.json("run", "show", run["id"])
    attempts = detail["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert "restarted while running" in (attempts[0]["error"] or "")
    assert "second attempt" in cli("run", "logs", run["id"]).stdout


def test_sigterm_lets_a_running_task_finish_then_exits(
    server: Server, cli: Cli, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    script = f"touch {started}; sleep 2; echo finished after the signal"
    cli("job", "add", "draining", "--now", "--", "sh", "-c", script)
    wait_for(started.exists, bool)

    assert server.stop() == 0  # SIGTERM; it used to exit in 0.2 s, killing the task
    log = server.log_text()
    assert "SIGTERM: stopping; 1 running task(s) get up to 10 s to finish" in log, log
    assert "draining: waiting up to 10 s for 1 running task(s)" in log, log

    server.start()
    run = only_run(cli, "draining")
    assert run["state"] == "success", cli.json("run", "show", run["id"])
    assert "finished after the signal" in cli("run", "logs", run["id"]).stdout


def test_second_server_on_the_same_data_dir_is_refused(server: Server) -> None:
    twin = Server(server.data_dir)
    with pytest.raises(AssertionError, match="in use by another tickwork process"):
        twin.start()


def test_enqueued_runs_execute_with_their_params(cli: Cli, tmp_path: Path) -> None:
    never = ("--cron", "0 0 1 1 *")
    cli("job", "add", "greet", *never, "--python", "tickwork.examples:hello",
        "--param", "name:string=Ada")  # fmt: skip
    cli("job", "add", "echo", *never, "--param", "n:integer",
        "--", "sh", "-c", "echo params=$TICKWORK_PARAMS")  # fmt: skip
    lines = tmp_path / "names.jsonl"
    lines.write_text('{"name": "Bob"}\n{"name": "Cy"}\n')
    cli("job", "enqueue", "greet", "--params", '{"name": "Di"}')
    cli("job", "enqueue", "greet", "--from-file", str(lines))
    cli("job", "enqueue", "echo", "--params", '{"n": 7}', "--count", "2")

    def finished(job: str, count: int) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = wait_for(
            lambda: cli.json("run", "list", "--job", job)["runs"],
            lambda runs: len(runs) == count and all(r["state"] in FINISHED for r in runs),
        )
        assert {(r["state"], r["trigger"]) for r in runs} == {("success", "enqueue")}
        return runs

    logs = [cli("run", "logs", r["id"]).stdout for r in finished("greet", 3)]
    greeted = {
        name for name in ("Ada", "Bob", "Cy", "Di") for log in logs if f"hello, {name}" in log
    }
    assert greeted == {"Bob", "Cy", "Di"}
    echoed = [cli("run", "logs", r["id"]).stdout for r in finished("echo", 2)]
    assert all('params={"n": 7}' in log for log in echoed), echoed
