"""Workflow definitions parsed from plain data (what YAML or JSON gives)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork.core.errors import ValidationError
from tickwork.core.model import (
    Callback,
    CallbackEvent,
    RetryPolicy,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TriggerRule,
)
from tickwork.core.validate import validate_tasks
from tickwork.core.workflow_spec import WorkflowSpec, parse_workflow

NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)


def etl() -> dict[str, Any]:
    """The issue's pipeline, as ``yaml.safe_load`` would give it."""
    return {
        "name": "etl",
        "schedule": {"kind": "cron", "cron": "0 2 * * *", "timezone": "Europe/Berlin"},
        "catchup": True,
        "tasks": [
            {"name": "extract_users", "kind": "python", "target": "pipelines.etl:extract_users"},
            {"name": "extract_orders", "kind": "shell", "argv": ["dump-orders", "--since", "1d"]},
            {
                "name": "join",
                "kind": "python",
                "target": "pipelines.etl:join",
                "upstream": ["extract_users", "extract_orders"],
                "kwargs": {"users": {"$result": "extract_users"}, "how": "inner"},
            },
            {
                "name": "aggregate",
                "kind": "python",
                "target": "pipelines.etl:aggregate",
                "upstream": ["join"],
                "retry": {"max_attempts": 3},
            },
            {
                "name": "load",
                "kind": "http",
                "method": "post",
                "url": "https://warehouse.example.org/load",
                "upstream": ["aggregate"],
                "trigger_rule": "none_failed",
                "timeout": 60,
            },
        ],
    }


def refusal(data: object, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        parse_workflow(data, **kwargs)
    return caught.value.field, caught.value.reason


def test_parse_workflow_reads_the_etl_pipeline() -> None:
    spec = parse_workflow(etl())
    assert spec.name == "etl"
    assert spec.schedule == Schedule(
        kind=ScheduleKind.CRON, cron="0 2 * * *", timezone="Europe/Berlin"
    )
    assert spec.catchup is True
    assert [t.name for t in spec.tasks] == [
        "extract_users",
        "extract_orders",
        "join",
        "aggregate",
        "load",
    ]
    join, aggregate, load = spec.tasks[2:]
    assert join.upstream == ("extract_users", "extract_orders")
    assert join.config == {
        "target": "pipelines.etl:join",
        "kwargs": {"users": {"$result": "extract_users"}, "how": "inner"},
    }
    assert join.trigger_rule is TriggerRule.ALL_SUCCESS
    assert aggregate.retry == RetryPolicy(max_attempts=3)
    assert load.kind is TaskKind.HTTP
    assert load.config["method"] == "POST"  # normalized by the task checks
    assert (load.trigger_rule, load.timeout) == (TriggerRule.NONE_FAILED, 60)
    assert spec.tasks[1].config == {"argv": ["dump-orders", "--since", "1d"]}


def test_parse_workflow_defaults_the_job_fields() -> None:
    spec = parse_workflow({"name": "w", "schedule": "now", "tasks": [etl()["tasks"][0]]})
    assert spec == WorkflowSpec(
        name="w",
        schedule=Schedule(kind=ScheduleKind.NOW),
        tasks=(
            Task(
                name="extract_users",
                kind=TaskKind.PYTHON,
                config={"target": "pipelines.etl:extract_users"},
            ),
        ),
    )


def test_parse_workflow_reads_the_job_fields() -> None:
    data = {
        **etl(),
        "timeout": 30,
        "retry": {"max_attempts": 2, "initial_delay": 900},
        "queue": "etl",
        "priority": 5,
        "tags": ["nightly"],
        "metadata": {"team": "data"},
    }
    spec = parse_workflow(data)
    assert spec.retry == RetryPolicy(max_attempts=2, initial_delay=900, max_delay=900)
    assert (spec.timeout, spec.queue, spec.priority) == (30, "etl", 5)
    assert (spec.tags, spec.metadata) == (("nightly",), {"team": "data"})


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("now", Schedule(kind=ScheduleKind.NOW)),
        ("*/5 * * * *", Schedule(kind=ScheduleKind.CRON, cron="*/5 * * * *")),
        (
            {"kind": "at", "at": "2026-07-01T02:00:00+02:00"},
            Schedule(kind=ScheduleKind.AT, at=datetime(2026, 7, 1, 0, tzinfo=UTC)),
        ),
        (
            {"kind": "cron", "cron": "0 3 * * *", "start": datetime(2026, 7, 1, tzinfo=UTC)},
            Schedule(
                kind=ScheduleKind.CRON, cron="0 3 * * *", start=datetime(2026, 7, 1, tzinfo=UTC)
            ),
        ),
    ],
)
def test_parse_workflow_reads_each_schedule_form(schedule: object, expected: Schedule) -> None:
    assert parse_workflow({**etl(), "schedule": schedule}).schedule == expected


def test_parse_workflow_leaves_the_input_untouched() -> None:
    data = etl()
    before = copy.deepcopy(data)
    parse_workflow(data)
    assert data == before


def test_parse_workflow_with_now_checks_the_schedule_meaning() -> None:
    assert parse_workflow(etl(), now=NOW).schedule.cron == "0 2 * * *"
    field, _ = refusal({**etl(), "schedule": "61 * * * *"}, now=NOW)
    assert field == "schedule.cron"
    field, _ = refusal({**etl(), "schedule": {"kind": "at", "at": "2020-01-01T00:00Z"}}, now=NOW)
    assert field == "schedule.at"


def with_tasks(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"name": "w", "schedule": "now", "tasks": list(tasks)}


def sh(name: str, *upstream: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "kind": "shell", "argv": ["true"], "upstream": list(upstream), **more}


@pytest.mark.parametrize(
    ("data", "field", "says"),
    [
        (with_tasks(), "tasks", "a workflow needs at least one task"),
        ({"name": "w", "schedule": "now"}, "tasks", "a workflow needs at least one task"),
        (with_tasks(sh("a", "c"), sh("b", "a"), sh("c", "b")), "tasks", "cycle (a -> b -> c -> a)"),
        (
            with_tasks(sh("a"), sh("join", "a", "ghost")),
            "tasks[1].upstream",
            "'ghost' is not another task of this job; name one of ['a', 'join'] (task 'join')",
        ),
        (with_tasks(sh("a"), sh("a")), "tasks[1].name", "'a' is used twice"),
        (with_tasks(sh("a", "a")), "tasks[0].upstream", "'a' is not another task"),
        (with_tasks(sh("a"), sh("b", "a", trigger_rule="always")), "tasks[1].trigger_rule", "use"),
        (
            with_tasks(sh("a", bogus=1)),
            "tasks[0].bogus",
            "shell setting; use argv, command, shell, env, cwd, log_max_bytes (task 'a')",
        ),
        (with_tasks({"name": "a", "kind": "cobol"}), "tasks[0].kind", "not a task kind"),
        (with_tasks({"kind": "shell", "argv": ["x"]}), "tasks[0].name", "is required"),
        (with_tasks(sh("a", upstream="b")), "tasks[0].upstream", "list of task names"),
        (with_tasks(sh("a", retry={"tries": 3})), "tasks[0].retry.tries", "is not a field"),
        (with_tasks(sh("a", retry={"max_attempts": 0})), "tasks[0].retry.max_attempts", "between"),
        ({**with_tasks(), "tasks": ["a"]}, "tasks[0]", "must be an object"),
        ({**with_tasks(sh("a")), "tasks": "a"}, "tasks", "must be a list of tasks"),
        ({**with_tasks(sh("a")), "owner": "me"}, "owner", "is not a field of a workflow"),
        ({"schedule": "now", "tasks": [sh("a")]}, "name", "is required"),
        ({**with_tasks(sh("a")), "name": "no spaces"}, "name", "is not a valid name"),
        ({**with_tasks(sh("a")), "schedule": None}, "schedule", "is required"),
        ({**with_tasks(sh("a")), "schedule": 5}, "schedule", "must be 'now'"),
        ({**with_tasks(sh("a")), "schedule": {"kind": "daily"}}, "schedule.kind", "use now, at"),
        ({**with_tasks(sh("a")), "schedule": {"kind": "at", "at": "soon"}}, "schedule.at", "ISO"),
        ({**with_tasks(sh("a")), "catchup": "yes"}, "catchup", "true or false"),
        ({**with_tasks(sh("a")), "priority": 1.5}, "priority", "whole number"),
        ({**with_tasks(sh("a")), "tags": "x"}, "tags", "list of strings"),
        ({**with_tasks(sh("a")), "timeout": 0}, "timeout", "above 0"),
        ({**with_tasks(sh("a")), "retry": {"jitter": 2}}, "retry.jitter", "fraction"),
        (["not", "an", "object"], "workflow", "must be an object"),
    ],
)
def test_parse_workflow_refuses_bad_definitions_naming_the_field_and_tasks(
    data: object, field: str, says: str
) -> None:
    got_field, reason = refusal(data)
    assert (got_field, says in reason) == (field, True), reason


def test_a_result_reference_must_name_an_upstream() -> None:
    join = {
        "name": "join",
        "kind": "python",
        "target": "m:join",
        "upstream": ["a"],
        "kwargs": {"rows": [{"$result": "a"}, {"$result": "b"}]},
    }
    field, reason = refusal(with_tasks(sh("a"), sh("b"), join))
    assert field == "tasks[2].kwargs.rows[1]"
    assert (
        reason
        == "uses the result of 'b', which is not an upstream of task 'join'; add it to upstream"
    )


def test_validate_tasks_accepts_a_dag() -> None:
    tasks = parse_workflow(with_tasks(sh("a"), sh("b", "a"))).tasks
    assert validate_tasks(tasks) == tasks


def test_parse_workflow_reads_the_dag_fields() -> None:
    hook = {"kind": "http", "url": "https://hooks.example.org/etl"}
    data = etl()
    data["tasks"][0].update(priority=7, pool="db", pool_slots=2)
    data["tasks"][2]["callbacks"] = {"on_retry": {"kind": "python", "target": "m.hooks:retry"}}
    data.update(max_active_runs=1, depends_on_past=True, callbacks={"on_failure": hook})
    spec = parse_workflow(data)
    first, join = spec.tasks[0], spec.tasks[2]
    assert (first.priority, first.pool, first.pool_slots) == (7, "db", 2)
    assert first.config == {"target": "pipelines.etl:extract_users"}  # not settings
    assert join.callbacks == {
        CallbackEvent.ON_RETRY: Callback(TaskKind.PYTHON, {"target": "m.hooks:retry"})
    }
    assert (spec.max_active_runs, spec.depends_on_past) == (1, True)
    assert spec.callbacks == {
        CallbackEvent.ON_FAILURE: Callback(TaskKind.HTTP, {"url": hook["url"]})
    }
    defaults = parse_workflow(with_tasks(sh("a")))
    assert (defaults.max_active_runs, defaults.depends_on_past, defaults.callbacks) == (
        None,
        False,
        {},
    )


@pytest.mark.parametrize(
    ("data", "field", "says"),
    [
        (with_tasks(sh("a"), sh("b", "a", pool="no space")), "tasks[1].pool", "(task 'b')"),
        (with_tasks(sh("a", pool_slots=0)), "tasks[0].pool_slots", "1 or more (task 'a')"),
        (with_tasks(sh("a", priority="high")), "tasks[0].priority", "-100 to 100 (task 'a')"),
        (
            with_tasks(sh("a", callbacks={"on_failure": {"kind": "http", "url": "nope"}})),
            "tasks[0].callbacks.on_failure.url",
            "http:// or https:// URL",
        ),
        (
            with_tasks(sh("a", callbacks={"on_done": {"kind": "http", "url": "https://x.org"}})),
            "tasks[0].callbacks.on_done",
            "is not a callback event; use on_failure, on_success, on_retry (task 'a')",
        ),
        ({**with_tasks(sh("a")), "max_active_runs": 0}, "max_active_runs", "1 or more"),
        ({**with_tasks(sh("a")), "depends_on_past": 1}, "depends_on_past", "true or false"),
        (
            {**with_tasks(sh("a")), "callbacks": {"on_success": {"kind": "python"}}},
            "callbacks.on_success.target",
            "import path",
        ),
    ],
)
def test_parse_workflow_refuses_bad_dag_fields(data: object, field: str, says: str) -> None:
    got_field, reason = refusal(data)
    assert (got_field, says in reason) == (field, True), reason
