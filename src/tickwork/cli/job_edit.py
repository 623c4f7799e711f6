"""A job as its definition (what ``job apply`` reads), and ``tickwork job edit NAME``.

``job show NAME -o yaml`` prints ``definition_of(job)``: apply it and nothing changes. ``job
edit`` writes that definition to a file, opens ``$VISUAL`` / ``$EDITOR`` (else ``vi``) on it
and applies what was saved, the way ``kubectl edit`` does.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from tickwork.cli.common import DEFAULT_OUTPUT, DEFAULT_URL, OutputOption, UrlOption, connect, fail
from tickwork.cli.complete import complete_job
from tickwork.cli.output import emit, print_line
from tickwork.sdk import ApiError, JobInfo, TaskInfo
from tickwork.sdk.definitions import DefinitionError, job_body, load_definition

_REFUSED = frozenset({409, 422})  # the definition is at fault


def definition_of(job: JobInfo) -> dict[str, Any]:
    """The job as a definition file holds it: no ids, instants of its life or unset fields."""
    schedule = {k: v for k, v in job["schedule"].items() if v is not None}
    body: dict[str, Any] = {
        "name": job["name"],
        "schedule": schedule,
        "catchup": job["catchup"],
        "tasks": [_task(t) for t in job["tasks"]],
        "retry": dict(job["retry"]),
        "queue": job["queue"],
        "priority": job["priority"],
        "tags": list(job["tags"]),
        "metadata": dict(job["metadata"]),
        "max_active_runs": job["max_active_runs"],
        "depends_on_past": job["depends_on_past"],
        "callbacks": dict(job["callbacks"]),
    }
    for key in ("timeout", "start_deadline", "sla", "jitter"):
        if job[key] is not None:
            body[key] = job[key]
    return body


def _task(task: TaskInfo) -> dict[str, Any]:
    body: dict[str, Any] = {"name": task["name"], "kind": task["kind"], **task["config"]}
    body.update(
        upstream=list(task["upstream"]), trigger_rule=task["trigger_rule"],
        pool_slots=task["pool_slots"], callbacks=dict(task["callbacks"]),
    )  # fmt: skip
    for key in ("timeout", "retry", "priority", "pool"):
        if task[key] is not None:
            body[key] = task[key]
    return body


def definition_yaml(job: JobInfo) -> str:
    return yaml.safe_dump(definition_of(job), sort_keys=False, allow_unicode=True)


def edit(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The job's name.", autocompletion=complete_job)
    ],
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Open a job's definition in $VISUAL or $EDITOR (else vi) and apply what you save.

    Saving it unchanged changes nothing; a definition the server refuses is kept in its
    file, whose path the error names, to fix and `job apply`."""
    with connect(ctx, url) as client:
        before = definition_yaml(client.get_job(name))
        path = _write(name, before)
        _open_editor(path)
        after = path.read_text(encoding="utf-8")
        if after == before:
            path.unlink()
            print_line(f"unchanged job {name} (nothing saved)")
            return
        try:
            applied = client.apply_job(job_body(load_definition(str(path))))
        except DefinitionError as e:
            fail(f"{e} (your edit is kept in {path})")
        except ApiError as e:
            if e.status not in _REFUSED:
                raise
            fail(f"{e.field or 'job'}: {e.message} (your edit is kept in {path})")
    path.unlink()
    emit(output, applied, f"{applied['outcome']} job {applied['job']['name']}")


def _write(name: str, text: str) -> Path:
    handle, raw = tempfile.mkstemp(prefix=f"tickwork-{name}-", suffix=".yaml")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    return Path(raw)


def _open_editor(path: Path) -> None:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        done = subprocess.run([*shlex.split(editor), str(path)], check=False)
    except OSError as e:
        fail(f"cannot start the editor {editor!r} ({e.strerror}); set $EDITOR")
    if done.returncode != 0:
        fail(f"the editor {editor!r} exited with {done.returncode}; nothing applied ({path})")
