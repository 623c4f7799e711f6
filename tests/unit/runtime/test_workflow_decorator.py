"""The Python front end: ``@workflow`` bodies calling ``@task`` functions build a spec."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Any

import pytest

import tickwork
from tickwork.core.errors import ValidationError
from tickwork.core.model import CallbackEvent
from tickwork.core.workflow_spec import parse_workflow
from tickwork.runtime.targets import resolve_target
from tickwork.sdk.workflow import TaskResult, Workflow, task, workflow

Rows = list[dict[str, Any]]
RAN: list[str] = []


@task
def extract_users() -> Rows:
    RAN.append("extract_users")
    return [{"id": 1, "name": "ada"}]


@task(retries=2)
def extract_orders(since: str = "1d") -> Rows:
    RAN.append("extract_orders")
    return [{"user": 1, "total": 30}]


@task
def join(users: Rows, orders: Rows, how: str = "inner") -> Rows:
    RAN.append("join")
    names = {u["id"]: u["name"] for u in users}
    return [{**o, "name": names[o["user"]]} for o in orders]


@task(timeout=600)
def aggregate(rows: Rows) -> dict[str, int]:
    RAN.append("aggregate")
    return {"total": sum(r["total"] for r in rows)}


@task(trigger_rule="none_failed")
def load(summary: dict[str, int]) -> None:
    RAN.append("load")


@task
def collect(items: list[Any]) -> int:
    return len(items)


@task
async def fetch(url: str) -> str:
    return f"fetched {url}"


@workflow(schedule={"kind": "cron", "cron": "0 2 * * *", "timezone": "Europe/Berlin"}, catchup=True)
def etl() -> None:
    joined = join(extract_users(), extract_orders(since="2d"))
    load(aggregate(joined))


MODULE = extract_users.target.partition(":")[0]  # the module as workers import it

#: The same pipeline, written the way a YAML file gives it.
YAML_FORM: dict[str, Any] = {
    "name": "etl",
    "schedule": {"kind": "cron", "cron": "0 2 * * *", "timezone": "Europe/Berlin"},
    "catchup": True,
    "tasks": [
        {"name": "extract_users", "kind": "python", "target": f"{MODULE}:extract_users"},
        {
            "name": "extract_orders",
            "kind": "python",
            "target": f"{MODULE}:extract_orders",
            "kwargs": {"since": "2d"},
            "retry": {"max_attempts": 3},
        },
        {
            "name": "join",
            "kind": "python",
            "target": f"{MODULE}:join",
            "upstream": ["extract_users", "extract_orders"],
            "kwargs": {
                "users": {"$result": "extract_users"},
                "orders": {"$result": "extract_orders"},
            },
        },
        {
            "name": "aggregate",
            "kind": "python",
            "target": f"{MODULE}:aggregate",
            "upstream": ["join"],
            "kwargs": {"rows": {"$result": "join"}},
            "timeout": 600,
        },
        {
            "name": "load",
            "kind": "python",
            "target": f"{MODULE}:load",
            "upstream": ["aggregate"],
            "kwargs": {"summary": {"$result": "aggregate"}},
            "trigger_rule": "none_failed",
        },
    ],
}


def test_the_decorated_pipeline_gives_the_yaml_form_without_running_a_task() -> None:
    RAN.clear()
    assert etl.spec() == YAML_FORM
    assert parse_workflow(etl.spec()) == parse_workflow(YAML_FORM) == etl.parse()
    assert RAN == []


def test_building_twice_gives_the_same_spec() -> None:
    assert etl.spec() == etl.spec()
    assert isinstance(etl, Workflow)
    assert (etl.name, repr(etl)) == ("etl", "<workflow etl>")


def test_a_task_outside_a_workflow_body_is_the_plain_function() -> None:
    RAN.clear()
    rows = join(extract_users(), extract_orders())
    assert aggregate(rows) == {"total": 30}
    assert RAN == ["extract_users", "extract_orders", "join", "aggregate"]


def test_workers_import_a_task_by_its_target_and_call_it() -> None:
    function = resolve_target(join.target)
    assert function is join
    assert function(users=[{"id": 1, "name": "ada"}], orders=[{"user": 1, "total": 2}]) == [
        {"user": 1, "total": 2, "name": "ada"}
    ]


async def test_an_async_task_still_looks_async_to_workers() -> None:
    assert inspect.iscoroutinefunction(resolve_target(fetch.target))
    assert not inspect.iscoroutinefunction(join)
    assert await fetch(url="https://example.org") == "fetched https://example.org"


def test_calling_a_task_twice_gives_two_nodes() -> None:
    @workflow(schedule="now")
    def twice() -> None:
        aggregate(join(extract_users(), extract_users()))

    spec = twice.spec()
    assert [t["name"] for t in spec["tasks"]] == [
        "extract_users",
        "extract_users__2",
        "join",
        "aggregate",
    ]
    assert spec["tasks"][2]["upstream"] == ["extract_users", "extract_users__2"]
    assert spec["schedule"] == "now"
    assert parse_workflow(spec).tasks[2].upstream == ("extract_users", "extract_users__2")


def test_results_in_lists_and_dicts_are_edges_too() -> None:
    @workflow(schedule="*/5 * * * *", name="fan_in", queue="etl", tags=["x"])
    def fan_in() -> None:
        collect(items=[extract_users(), {"more": extract_orders()}])

    spec = fan_in.spec()
    assert (spec["name"], spec["queue"], spec["tags"], spec["catchup"]) == (
        "fan_in",
        "etl",
        ["x"],
        False,
    )
    assert spec["tasks"][2]["upstream"] == ["extract_users", "extract_orders"]
    assert spec["tasks"][2]["kwargs"] == {
        "items": [{"$result": "extract_users"}, {"more": {"$result": "extract_orders"}}]
    }
    assert parse_workflow(spec).name == "fan_in"


def test_task_options_name_the_node() -> None:
    renamed = task(name="users_v2")(extract_users.fn)

    @workflow(schedule="now")
    def w() -> None:
        renamed()

    assert w.spec()["tasks"][0]["name"] == "users_v2"


def test_a_result_cannot_be_inspected_while_the_workflow_is_built() -> None:
    @workflow(schedule="now")
    def peeks() -> None:
        users = extract_users()
        assert isinstance(users, TaskResult)
        if users:
            load(aggregate(users))

    with pytest.raises(TypeError, match="does not exist while the workflow is built"):
        peeks.spec()


def test_a_non_json_argument_is_refused_when_parsed() -> None:
    @workflow(schedule="now")
    def dated() -> None:
        extract_orders(since=datetime(2026, 1, 1, tzinfo=UTC))  # type: ignore[arg-type]

    with pytest.raises(ValidationError) as caught:
        dated.parse()
    assert caught.value.field == "tasks[0].kwargs.since"


def test_a_wrong_call_names_the_task() -> None:
    @workflow(schedule="now")
    def wrong() -> None:
        join(extract_users())  # type: ignore[call-arg]

    with pytest.raises(TypeError, match="task join: missing a required argument: 'orders'"):
        wrong.spec()


def test_tasks_must_be_importable_module_level_functions() -> None:
    def local() -> None: ...

    with pytest.raises(TypeError, match="not a module-level function"):
        task(local)


def test_a_workflow_takes_no_arguments_and_does_not_nest() -> None:
    def needs_a_day(day: str) -> None: ...

    with pytest.raises(TypeError, match="must take no arguments"):
        workflow(schedule="now")(needs_a_day)  # type: ignore[arg-type]

    @workflow(schedule="now")
    def outer() -> None:
        etl.spec()

    with pytest.raises(RuntimeError, match="inside another workflow"):
        outer.spec()


# -- one decorator, standalone and in workflows ------------------------------------------------


@tickwork.task(retries=1, pool="db", pool_slots=2, priority=9, queue="etl")
def dump(table: str) -> dict[str, int]:
    return {"rows": len(table)}


@tickwork.task(callbacks={"on_failure": {"kind": "python", "target": "m.hooks:alert"}})
def publish(counts: list[dict[str, int]]) -> None:
    return None


def test_the_one_task_decorator_is_exported_from_both_modules() -> None:
    assert tickwork.task is task
    assert tickwork.workflow is workflow
    assert isinstance(dump, tickwork.TaskFunction)


def test_a_task_is_a_standalone_job_and_a_workflow_node_alike() -> None:
    job = tickwork.job_from(dump, name="dump", kwargs={"table": "users"})
    assert job["queue"] == "etl"
    assert job["task"] == {
        "kind": "python",
        "target": f"{MODULE}:dump",
        "kwargs": {"table": "users"},
        "retry": {"max_attempts": 2},
        "pool": "db",
        "pool_slots": 2,
        "priority": 9,
    }

    @workflow(schedule="now", queue="etl", max_active_runs=1, depends_on_past=True, sla=5400)
    def nightly() -> None:
        publish([dump("users"), dump(table="orders")])

    spec = nightly.spec()
    assert (spec["max_active_runs"], spec["depends_on_past"], spec["queue"]) == (1, True, "etl")
    assert (spec["sla"], "start_deadline" in spec) == (5400, False)
    first, second, last = spec["tasks"]
    assert first == {
        "name": "dump",
        "kind": "python",
        "target": f"{MODULE}:dump",
        "kwargs": {"table": "users"},
        "retry": {"max_attempts": 2},
        "pool": "db",
        "pool_slots": 2,
        "priority": 9,
    }
    assert (second["name"], second["kwargs"]) == ("dump__2", {"table": "orders"})
    assert last["upstream"] == ["dump", "dump__2"]
    assert last["kwargs"] == {"counts": [{"$result": "dump"}, {"$result": "dump__2"}]}
    assert last["callbacks"] == {"on_failure": {"kind": "python", "target": "m.hooks:alert"}}
    parsed = nightly.parse()
    assert (parsed.tasks[0].pool, parsed.tasks[0].pool_slots) == ("db", 2)
    assert parsed.tasks[2].upstream == ("dump", "dump__2")


def test_a_task_asking_for_another_queue_than_its_workflows_is_refused() -> None:
    @workflow(schedule="now")
    def elsewhere() -> None:
        dump("users")

    with pytest.raises(
        ValueError, match=r"task dump asks for queue 'etl'.*@workflow\(queue='etl'\)"
    ):
        elsewhere.spec()


def test_workflow_callbacks_reach_the_spec() -> None:
    hook = {"kind": "http", "url": "https://hooks.example.org/etl"}

    @workflow(schedule="now", callbacks={"on_failure": hook})
    def hooked() -> None:
        extract_users()

    assert hooked.spec()["callbacks"] == {"on_failure": hook}
    assert hooked.parse().callbacks[CallbackEvent.ON_FAILURE].config == {"url": hook["url"]}
