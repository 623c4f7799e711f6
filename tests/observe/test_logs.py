"""Log lines: JSON with the bound context, text with it appended, secrets masked in both,
and chatty libraries quiet."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime

import pytest

from tests.helpers import make_job, shell_task
from tickwork.core.errors import ValidationError
from tickwork.core.model import RunTrigger, TaskRun
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.observe.logs import (
    JsonFormatter,
    TextFormatter,
    bind,
    configure_logging,
    mask,
    set_process_fields,
)
from tickwork.observe.runner import ObservedRunner
from tickwork.ports import LogSink, RunResult


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("tickwork.worker", logging.WARNING, __file__, 1, message, args, None)


def test_json_lines_carry_the_bound_context_and_process_fields() -> None:
    epoch = [7]
    set_process_fields(worker="w1", epoch=lambda: epoch[0])
    try:
        with bind(job="nightly", run_id="r1", attempt=2):
            line = json.loads(JsonFormatter().format(record("task %s slow", "x")))
        epoch[0] = 8
        outside = json.loads(JsonFormatter().format(record("idle")))
    finally:
        set_process_fields(worker=None, epoch=None)
    assert line["message"] == "task x slow"
    assert (line["level"], line["logger"]) == ("warning", "tickwork.worker")
    assert {k: line[k] for k in ("job", "run_id", "attempt", "worker", "epoch")} == {
        "job": "nightly", "run_id": "r1", "attempt": 2, "worker": "w1", "epoch": 7,
    }  # fmt: skip
    assert "job" not in outside and outside["epoch"] == 8
    assert line["ts"].endswith("+00:00")


def test_text_lines_append_the_context() -> None:
    with bind(task_run_id="t9"):
        text = TextFormatter().format(record("boom"))
    assert text.endswith("WARNING tickwork.worker: boom task_run_id=t9")


@pytest.mark.parametrize(
    ("raw", "masked"),
    [
        ("connect postgresql://app:s3cret@db/x", "connect postgresql://app:***@db/x"),
        ("redis://:pw@h:6379/0 down", "redis://:***@h:6379/0 down"),
        ("Authorization: Bearer tw_abc_def", "Authorization: Bearer ***"),
        ("GET /x?token=abc&page=2", "GET /x?token=***&page=2"),
        ('{"password": "hunter2"}', '{"password": "***"}'),
        ("admin token: /data/admin.token", "admin token: /data/admin.token"),  # a path, kept
    ],
)
def test_secrets_are_masked(raw: str, masked: str) -> None:
    assert mask(raw) == masked
    assert json.loads(JsonFormatter().format(record(raw)))["message"] == masked


def test_configure_logging_refuses_an_unknown_format_and_quiets_http_clients() -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        with pytest.raises(ValidationError, match="log_format"):
            configure_logging("xml")
        configure_logging("json")
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        assert logging.getLogger("httpx2").getEffectiveLevel() == logging.WARNING
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


class Discard:
    def write(self, stream: str, data: str) -> None:
        return None


class Recording:
    """A runner that logs a line while it runs (what a real runner's logging looks like)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        self.lines.append(JsonFormatter().format(record("running")))
        return RunResult(ok=True)


async def test_an_attempt_logs_with_its_job_run_and_attempt() -> None:

    t = datetime.now(UTC)
    job = make_job("ctx", now=t, task=shell_task("true"))
    task_run = new_run(job, t, trigger=RunTrigger.MANUAL, now=t, make_id=new_id).task_runs[0]
    inner = Recording()
    assert (await ObservedRunner(inner).run(task_run, Discard(), asyncio.Event())).ok
    (line,) = [json.loads(x) for x in inner.lines]
    assert (line["job"], line["run_id"], line["task_run_id"], line["attempt"]) == (
        "ctx", task_run.run_id, task_run.id, 1,
    )  # fmt: skip
