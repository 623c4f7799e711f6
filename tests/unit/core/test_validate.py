"""Job and task spec validation."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork.core.errors import ValidationError
from tickwork.core.model import (
    Callback,
    CallbackEvent,
    Job,
    Pool,
    RetryPolicy,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
)
from tickwork.core.validate import (
    validate_job,
    validate_job_name,
    validate_pool,
    validate_task,
    validate_tasks,
)

NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)


def shell(name: str = "main", **config: Any) -> Task:
    return Task(name=name, kind=TaskKind.SHELL, config=config or {"argv": ["echo", "hi"]})


def http(**config: Any) -> Task:
    return Task(name="main", kind=TaskKind.HTTP, config=config)


def python(**config: Any) -> Task:
    return Task(name="main", kind=TaskKind.PYTHON, config=config)


def a_job(**changes: Any) -> Job:
    base = Job(
        id="j1",
        name="backup",
        schedule=Schedule(kind=ScheduleKind.CRON, cron="30 2 * * *", timezone="Europe/Berlin"),
        tasks=(shell(),),
        created_at=NOW,
        updated_at=NOW,
    )
    return replace(base, **changes)


def refusal(check: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        check(*args, **kwargs)
    return caught.value.field, caught.value.reason


# -- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "backup", "Nightly_report-2.v1", "9lives", "x" * 128])
def test_job_name_accepts_letters_digits_and_separators(name: str) -> None:
    assert validate_job_name(name) == name


@pytest.mark.parametrize("name", ["", "-x", ".hidden", "has space", "x" * 129, "naïve", "a/b"])
def test_job_name_refuses_other_names(name: str) -> None:
    field, reason = refusal(validate_job_name, name)
    assert field == "name"
    assert "use 1-128 letters, digits" in reason


# -- tasks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "field", "says"),
    [
        (shell(argv=[]), "tasks[0].config.argv", "non-empty list of strings"),
        (shell(argv="echo hi"), "tasks[0].config.argv", "non-empty list of strings"),
        (shell(argv=["echo", 1]), "tasks[0].config.argv", "non-empty list of strings"),
        (shell(argv=[""]), "tasks[0].config.argv", "non-empty list of strings"),
        (shell(command="echo hi"), "tasks[0].config.shell", "only with shell: true"),
        (shell(command="", shell=True), "tasks[0].config.command", "non-empty command"),
        (shell(shell=True), "tasks[0].config.command", "non-empty command"),
        (shell(argv=["a"], command="a", shell=True), "tasks[0].config", "not both"),
        (shell(argv=["a"], shell="yes"), "tasks[0].config.shell", "true or false"),
        (shell(argv=["a"], env={"A": 1}), "tasks[0].config.env", "string values"),
        (shell(argv=["a"], cwd=""), "tasks[0].config.cwd", "directory path"),
        (shell(argv=["a"], stdin="x"), "tasks[0].config.stdin", "use argv, command"),
        (http(url="https://x.org", method="FETCH"), "tasks[0].config.method", "GET, POST"),
        (http(url="ftp://x.org"), "tasks[0].config.url", "http:// or https://"),
        (http(url="https:///path"), "tasks[0].config.url", "with a host"),
        (http(url="http://x.org:0/"), "tasks[0].config.url", "with a host"),
        (http(url="http://[::1/"), "tasks[0].config.url", "with a host"),
        (http(url="https://x.org", headers={"A": 1}), "tasks[0].config.headers", "string"),
        (http(url="https://x.org", body={1: "x"}), "tasks[0].config.body", "must be a string"),
        (http(url="https://x.org", body=float("nan")), "tasks[0].config.body", "finite"),
        (http(url="https://x.org", timeout=3), "tasks[0].config.timeout", "not a http setting"),
        (shell(argv=["a"], log_max_bytes=10), "tasks[0].config.log_max_bytes", "from 4096"),
        (python(target="p:f", log_max_bytes="1M"), "tasks[0].config.log_max_bytes", "bytes"),
        (python(target="mypkg.tasks"), "tasks[0].config.target", "mypkg.tasks:hello"),
        (python(target="my-pkg:run"), "tasks[0].config.target", "import path"),
        (python(target="pkg:run", kwargs=[1]), "tasks[0].config.kwargs", "JSON object"),
        (python(target="pkg:run", kwargs={"a": {1, 2}}), "tasks[0].config.kwargs.a", "not JSON"),
        (python(target="pkg:run", kwargs={"a": [object()]}), "tasks[0].config.kwargs.a[0]", ""),
        (replace(shell(), kind="java"), "tasks[0].kind", "use shell, http or python"),  # type: ignore[arg-type]
        (replace(shell(), name="bad name"), "tasks[0].name", "valid name"),
        (replace(shell(), timeout=0), "tasks[0].timeout", "above 0 and at most 7 days"),
        (replace(shell(), timeout=8 * 86400), "tasks[0].timeout", "at most 7 days"),
        (replace(shell(), timeout=True), "tasks[0].timeout", "number of seconds"),
        (replace(shell(), config=["argv"]), "tasks[0].config", "an object of shell settings"),  # type: ignore[arg-type]
        (replace(shell(), retry=RetryPolicy(max_attempts=0)), "tasks[0].retry.max_attempts", ""),
    ],
)
def test_validate_task_refuses_naming_the_field(task: Task, field: str, says: str) -> None:
    got_field, reason = refusal(validate_task, task)
    assert got_field == field
    assert says in reason


def test_validate_task_accepts_each_kind_and_normalizes() -> None:
    argv = validate_task(shell(argv=("pg_dump", "db"), env={"A": "1"}, cwd="/tmp"))
    assert argv.config["argv"] == ["pg_dump", "db"]
    assert validate_task(shell(command="ls | wc -l", shell=True)).config["shell"] is True
    hook = validate_task(http(url="https://example.org/hook", method="post", body={"a": [1]}))
    assert hook.config["method"] == "POST"
    assert validate_task(http(url="http://127.0.0.1:8080/x")).config["method"] == "GET"
    call = validate_task(python(target="mypkg.tasks:hello", kwargs={"name": "x", "n": None}))
    assert call.kind is TaskKind.PYTHON
    assert validate_task(replace(shell(), kind="shell")).kind is TaskKind.SHELL  # type: ignore[arg-type]


def test_validate_tasks_needs_one_and_accepts_a_dag() -> None:
    assert refusal(validate_tasks, ()) == ("tasks", "a job needs at least one task")
    dag = (shell("a"), shell("b"), replace(shell("c"), upstream=("a", "b")))
    assert validate_tasks(dag) == dag


@pytest.mark.parametrize(
    ("tasks", "field", "reason"),
    [
        (
            (shell("a"), shell("a")),
            "tasks[1].name",
            "'a' is used twice; give each task its own name (task 'a')",
        ),
        (
            (replace(shell("a"), upstream=("ghost",)),),
            "tasks[0].upstream",
            "'ghost' is not another task of this job; name one of ['a']",
        ),
        (
            (shell("a"), replace(shell("join"), upstream=("a", "ghost"))),
            "tasks[1].upstream",
            "'ghost' is not another task of this job; name one of ['a', 'join'] (task 'join')",
        ),
        (
            (replace(shell("a"), upstream=("a",)),),
            "tasks[0].upstream",
            "'a' is not another task of this job; name one of ['a']",
        ),
        (
            (
                replace(shell("a"), upstream=("c",)),
                replace(shell("b"), upstream=("a",)),
                replace(shell("c"), upstream=("b",)),
            ),
            "tasks",
            "the tasks form a cycle (a -> b -> c -> a); upstreams must form a DAG",
        ),
        (
            (replace(shell("a"), upstream="b"),),  # type: ignore[arg-type]
            "tasks[0].upstream",
            "must be a list of task names",
        ),
        (
            (shell("a"), replace(shell("b"), config={"argv": []})),
            "tasks[1].config.argv",
            "must be a non-empty list of strings such as ['pg_dump', 'db'] (task 'b')",
        ),
        (
            (
                shell("a"),
                shell("b"),
                replace(python(target="m:f", kwargs={"x": {"$result": "b"}}), upstream=("a",)),
            ),
            "tasks[2].config.kwargs.x",
            "uses the result of 'b', which is not an upstream of task 'main'; add it to upstream",
        ),
    ],
)
def test_validate_tasks_checks_the_graph_naming_the_tasks(
    tasks: tuple[Task, ...], field: str, reason: str
) -> None:
    assert refusal(validate_tasks, tasks) == (field, reason)


def test_a_result_reference_to_an_upstream_is_accepted_anywhere_in_the_config() -> None:
    body = {"rows": [{"$result": "a"}], "meta": {"n": 1}}
    hook = replace(http(url="https://example.org/load", method="POST", body=body), upstream=("a",))
    assert validate_tasks((shell("a"), hook))[1].config["body"] == body


# -- DAG fields: priority, pool, callbacks -----------------------------------------------------

HOOK = {"kind": "http", "url": "https://hooks.example.org/x", "headers": {"X-Key": "k"}}


def test_validate_task_accepts_priority_pool_and_callbacks() -> None:
    task = replace(
        shell(),
        priority=-5,
        pool="db.main",
        pool_slots=2,
        callbacks={"on_failure": HOOK, "on_retry": {"kind": "python", "target": "m.hooks:x"}},  # type: ignore[dict-item]
    )
    valid = validate_task(task)
    assert (valid.priority, valid.pool, valid.pool_slots) == (-5, "db.main", 2)
    assert valid.callbacks == {
        CallbackEvent.ON_FAILURE: Callback(
            TaskKind.HTTP, {"url": "https://hooks.example.org/x", "headers": {"X-Key": "k"}}
        ),
        CallbackEvent.ON_RETRY: Callback(TaskKind.PYTHON, {"target": "m.hooks:x"}),
    }
    hook = Callback(TaskKind.PYTHON, {"target": "m:f"})
    assert validate_task(replace(shell(), callbacks={CallbackEvent.ON_SUCCESS: hook})).callbacks


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"priority": 101}, "tasks[0].priority", "from -100 to 100"),
        ({"priority": "high"}, "tasks[0].priority", "from -100 to 100"),
        ({"priority": True}, "tasks[0].priority", "from -100 to 100"),
        ({"pool": "has space"}, "tasks[0].pool", "is not a valid name"),
        ({"pool": ""}, "tasks[0].pool", "is not a valid name"),
        ({"pool_slots": 0}, "tasks[0].pool_slots", "1 or more"),
        ({"pool_slots": 1.5}, "tasks[0].pool_slots", "1 or more"),
        ({"callbacks": []}, "tasks[0].callbacks", "object with on_failure, on_success, on_retry"),
        ({"callbacks": {"on_start": HOOK}}, "tasks[0].callbacks.on_start", "not a callback event"),
        ({"callbacks": {"on_failure": "x"}}, "tasks[0].callbacks.on_failure", "an object"),
        (
            {"callbacks": {"on_failure": {"kind": "shell", "argv": ["x"]}}},
            "tasks[0].callbacks.on_failure.kind",
            "'shell' is not a callback kind; use http (url) or python (target)",
        ),
        (
            {"callbacks": {"on_failure": {"kind": "http", "url": "ftp://x"}}},
            "tasks[0].callbacks.on_failure.url",
            "http:// or https:// URL",
        ),
        (
            {"callbacks": {"on_failure": {"kind": "http"}}},
            "tasks[0].callbacks.on_failure.url",
            "http:// or https:// URL",
        ),
        (
            {"callbacks": {"on_failure": {**HOOK, "method": "PUT"}}},
            "tasks[0].callbacks.on_failure.method",
            "is not a http callback setting; use url, url_auth, headers",
        ),
        (
            {"callbacks": {"on_failure": {**HOOK, "headers": {"X": 1}}}},
            "tasks[0].callbacks.on_failure.headers",
            "string values",
        ),
        (
            {"callbacks": {"on_success": {"kind": "python", "target": "no colon"}}},
            "tasks[0].callbacks.on_success.target",
            "import path such as 'mypkg.tasks:hello'",
        ),
        (
            {"callbacks": {"on_success": {"kind": "python", "target": "m:f", "kwargs": {}}}},
            "tasks[0].callbacks.on_success.kwargs",
            "use target",
        ),
    ],
)
def test_validate_task_refuses_bad_dag_fields(
    changes: dict[str, Any], field: str, says: str
) -> None:
    got_field, reason = refusal(validate_task, replace(shell(), **changes))
    assert (got_field, says in reason) == (field, True), reason


def test_validate_pool_checks_name_slots_and_description() -> None:
    assert validate_pool(Pool("db", 4, "the main database")) == Pool("db", 4, "the main database")
    assert refusal(validate_pool, Pool("a b", 1))[0] == "name"
    assert refusal(validate_pool, Pool("db", 0)) == (
        "slots",
        "must be a whole number from 1 to 1000000",
    )
    assert refusal(validate_pool, Pool("db", True))[0] == "slots"
    assert refusal(validate_pool, Pool("db", 1, "x" * 1001))[0] == "description"


# -- jobs ------------------------------------------------------------------------------------


def test_validate_job_returns_the_normalized_job() -> None:
    job = a_job(
        schedule=Schedule(kind=ScheduleKind.CRON, cron="30  2 * * mon", timezone="Europe/Berlin"),
        tasks=(http(url="https://example.org", method="get"),),
        tags=["nightly", "db"],
        metadata={"owner": "data", "limits": [1, 2.5]},
        queue="gpu-1",
        priority=-100,
    )
    valid = validate_job(job, NOW)
    assert valid.schedule.cron == "30 2 * * MON"
    assert valid.tasks[0].config["method"] == "GET"
    assert valid.tags == ("nightly", "db")
    assert valid.metadata == {"owner": "data", "limits": [1, 2.5]}
    policies = validate_job(
        a_job(max_active_runs=1, depends_on_past=True, callbacks={"on_success": HOOK}), NOW
    )
    assert (policies.max_active_runs, policies.depends_on_past) == (1, True)
    assert policies.callbacks[CallbackEvent.ON_SUCCESS].config["url"] == HOOK["url"]


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"name": ""}, "name", "valid name"),
        ({"schedule": Schedule(kind=ScheduleKind.CRON, cron="* *")}, "schedule.cron", "5 fields"),
        ({"tasks": ()}, "tasks", "at least one task"),
        ({"retry": RetryPolicy(jitter=2)}, "retry.jitter", "between 0 and 1"),
        ({"timeout": -1}, "timeout", "above 0"),
        ({"queue": "GPU"}, "queue", "a-z, 0-9"),
        ({"queue": "x" * 65}, "queue", "1-64"),
        ({"priority": 101}, "priority", "-100 to 100"),
        ({"priority": True}, "priority", "-100 to 100"),
        ({"tags": ("x" * 65,)}, "tags[0]", "1-64 characters"),
        ({"tags": ("",)}, "tags[0]", "1-64 characters"),
        ({"tags": tuple(f"t{i}" for i in range(33))}, "tags", "at most 32"),
        ({"tags": "nightly"}, "tags", "list of strings"),
        ({"metadata": {"when": NOW}}, "metadata.when", "not JSON"),
        ({"metadata": {1: "x"}}, "metadata", "must be a string"),
        ({"metadata": []}, "metadata", "JSON object"),
        ({"max_active_runs": 0}, "max_active_runs", "1 or more, or null"),
        ({"max_active_runs": "2"}, "max_active_runs", "1 or more, or null"),
        ({"depends_on_past": "yes"}, "depends_on_past", "true or false"),
        ({"callbacks": {"on_fail": HOOK}}, "callbacks.on_fail", "use on_failure"),
        (
            {"callbacks": {"on_failure": {"kind": "python"}}},
            "callbacks.on_failure.target",
            "import path",
        ),
    ],
)
def test_validate_job_refuses_naming_the_field(
    changes: dict[str, Any], field: str, says: str
) -> None:
    got_field, reason = refusal(validate_job, a_job(**changes), NOW)
    assert (got_field, says in reason) == (field, True), reason


def test_validate_job_refuses_metadata_nested_too_deep() -> None:
    deep: Any = "leaf"
    for _ in range(70):
        deep = [deep]
    field, reason = refusal(validate_job, a_job(metadata={"x": deep}), NOW)
    assert field.startswith("metadata.x")
    assert "nests deeper than 64 levels" in reason


def test_validate_job_passes_allow_past_to_the_schedule() -> None:
    past = a_job(schedule=Schedule(kind=ScheduleKind.AT, at=datetime(2026, 1, 1, tzinfo=UTC)))
    assert refusal(validate_job, past, NOW)[0] == "schedule.at"
    assert validate_job(past, NOW, allow_past=True).schedule.at == datetime(2026, 1, 1, tzinfo=UTC)
