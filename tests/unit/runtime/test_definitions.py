"""Loading definitions (files and modules) and turning them into the API's job body."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.etl import etl
from tickwork.api.schemas.create import JobCreate
from tickwork.core.workflow_spec import parse_workflow
from tickwork.sdk.definitions import DefinitionError, job_body, load_definition

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

AT_FLOW = """\
name: once
schedule: {kind: at, at: 2027-01-02T03:04:05+01:00}
timeout: 30
depends_on_past: true
callbacks: {on_failure: {kind: http, url: "https://hooks.example.org/x", headers: {X: y}}}
tasks:
  - name: a
    kind: http
    url: https://example.org/a
    method: post
    priority: -3
    pool: web
    pool_slots: 2
    retry: {max_attempts: 2}
    callbacks: {on_success: {kind: python, target: "m.hooks:done"}}
  - {name: b, kind: shell, command: "echo $X", shell: true, upstream: [a], trigger_rule: one_failed}
"""


def test_the_yaml_and_python_forms_of_the_example_are_one_definition() -> None:
    from_yaml = load_definition(str(EXAMPLES / "etl.yaml"))
    assert from_yaml == etl.parse() == load_definition("examples.etl:etl")
    assert job_body(from_yaml) == job_body(etl.parse())


def test_a_definition_survives_the_trip_through_the_api_body(tmp_path: Path) -> None:
    path = tmp_path / "once.yml"
    path.write_text(AT_FLOW)
    spec = load_definition(str(path))
    body = job_body(spec)
    assert body["schedule"] == {"kind": "at", "timezone": "UTC", "at": "2027-01-02T03:04:05+01:00"}
    assert body["tasks"][0]["method"] == "POST"
    created = JobCreate.model_validate(body).to_spec()
    assert created.tasks == spec.tasks
    assert (created.callbacks, created.timeout, created.depends_on_past) == (
        spec.callbacks,
        30,
        True,
    )
    reparsed = parse_workflow({**body, "schedule": dict(body["schedule"])})
    assert reparsed.tasks == spec.tasks


def test_a_file_of_another_name_is_read_as_yaml_and_json_too(tmp_path: Path) -> None:
    path = tmp_path / "flow.definition"
    path.write_text(
        '{"name": "f", "schedule": "now", "tasks": [{"name": "a", "kind": "shell", "argv": ["x"]}]}'
    )
    assert load_definition(str(path)).name == "f"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("name: f\n  bad: indent\n", "invalid YAML: mapping values are not allowed here at line 2"),
        (
            "{name: f, schedule: now, tasks: [{name: a, kind: shell, argv: [x]}], owner: me}",
            "owner: is not a field",
        ),
        (b"\xff\xfe", "cannot read it"),
    ],
)
def test_a_bad_file_is_a_definition_error_naming_it(
    tmp_path: Path, text: str | bytes, says: str
) -> None:
    path = tmp_path / "flow.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(DefinitionError) as caught:
        load_definition(str(path))
    assert str(caught.value).startswith(f"{path}: {says}"), str(caught.value)
