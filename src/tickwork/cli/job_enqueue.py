"""``tickwork job enqueue``: runs of an existing job with params, task-queue style."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from tickwork.cli.common import (
    DEFAULT_OUTPUT,
    DEFAULT_URL,
    OutputOption,
    UrlOption,
    connect,
    fail,
)
from tickwork.cli.output import emit
from tickwork.sdk.runs import MAX_ENQUEUE_BATCH

Params = dict[str, Any] | None


def enqueue(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job's name.")],
    *,
    params: Annotated[
        str | None,
        typer.Option("--params", help="Params of each run, a JSON object.", show_default="{}"),
    ] = None,
    count: Annotated[
        int, typer.Option("--count", min=1, help="How many runs (each with --params).")
    ] = 1,
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from-file",
            help="JSON Lines: one run per line, the line its params object.",
            show_default="none",
        ),
    ] = None,
    priority: Annotated[
        int | None,
        typer.Option(
            min=-100, max=100, help="Priority of the runs' tasks.", show_default="the job's"
        ),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Enqueue runs of an existing job, each with its own params (python tasks get them as
    keyword arguments, shell tasks as JSON in TICKWORK_PARAMS). Sent 5,000 per request."""
    if from_file is not None and (count != 1 or params is not None):
        fail("--from-file: give either --from-file or --params/--count, not both")
    items = _read_lines(from_file) if from_file else [_object(params, "--params")] * count
    run_ids: list[str] = []
    with connect(ctx, url) as client:
        for start in range(0, len(items), MAX_ENQUEUE_BATCH):
            chunk = items[start : start + MAX_ENQUEUE_BATCH]
            run_ids += client.enqueue_many(name, chunk, priority=priority)["run_ids"]
    line = f"enqueued run {run_ids[0]} of {name}" if len(run_ids) == 1 else ""
    emit(output, {"run_ids": run_ids}, line or f"enqueued {len(run_ids)} runs of {name}")


def _object(text: str | None, where: str) -> Params:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        fail(f"{where}: not valid JSON ({e})")
    if not isinstance(value, dict):
        fail(f"{where}: must be a JSON object, e.g. '{{\"user\": 42}}'")
    return value


def _read_lines(path: Path) -> list[Params]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"--from-file: cannot read {path} ({e})")
    items = [_object(line, f"{path}:{n}") for n, line in _numbered(text)]
    if not items:
        fail(f"--from-file: {path} holds no line to enqueue")
    return items


def _numbered(text: str) -> Iterator[tuple[int, str]]:
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield n, line
