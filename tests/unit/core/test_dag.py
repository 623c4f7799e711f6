"""DAG readiness: graph order, cycles, every trigger rule, propagation and branches."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.core.dag import (
    Decisions,
    TriggerRule,
    affected,
    check_branch,
    decide,
    downstream_of,
    evaluate,
    find_cycle,
    topological_order,
)
from tickwork.core.errors import ValidationError
from tickwork.core.model import Task, TaskKind, TaskRunState
from tickwork.core.states import TERMINAL

S = TaskRunState
R = TriggerRule
OK, FAIL, SKIP, UF, CANC = S.SUCCESS, S.FAILED, S.SKIPPED, S.UPSTREAM_FAILED, S.CANCELLED
RUN, PEND, SCHED = S.RUNNING, S.PENDING, S.SCHEDULED


def node(name: str, *upstream: str, rule: TriggerRule = R.ALL_SUCCESS) -> Task:
    return Task(
        name=name,
        kind=TaskKind.SHELL,
        config={"argv": ["true"]},
        upstream=upstream,
        trigger_rule=rule,
    )


def run_states(tasks: Sequence[Task], **given: TaskRunState) -> dict[str, TaskRunState]:
    """Every task pending unless given."""
    return {task.name: given.get(task.name, PEND) for task in tasks}


# -- the graph ---------------------------------------------------------------------------------


def test_topological_order_puts_upstreams_first_and_keeps_declaration_order() -> None:
    tasks = [node("load", "aggregate"), node("extract_orders"), node("aggregate", "join")]
    tasks += [node("join", "extract_users", "extract_orders"), node("extract_users")]
    assert topological_order(tasks) == (
        "extract_orders",
        "extract_users",
        "join",
        "aggregate",
        "load",
    )


def test_find_cycle_prints_the_path_in_the_direction_work_flows() -> None:
    tasks = [node("a", "c"), node("b", "a"), node("c", "b"), node("d")]
    assert find_cycle(tasks) == ("a", "b", "c", "a")
    assert find_cycle([node("a"), node("b", "a")]) == ()
    assert find_cycle([node("a", "a")]) == ("a", "a")


def test_topological_order_refuses_a_cycle_with_the_cycle_in_the_error() -> None:
    with pytest.raises(ValidationError) as caught:
        topological_order([node("x"), node("a", "b", "x"), node("b", "a")])
    assert caught.value.field == "tasks"
    assert "cycle (a -> b -> a)" in caught.value.reason


def test_find_cycle_handles_a_long_chain_without_recursion() -> None:
    chain = [node("t0")] + [node(f"t{i}", f"t{i - 1}") for i in range(1, 5000)]
    assert find_cycle(chain) == ()
    assert topological_order(chain)[-1] == "t4999"


def test_affected_is_the_direct_downstreams() -> None:
    tasks = [node("a"), node("b", "a"), node("c", "a"), node("d", "b", "c")]
    assert affected(tasks, "a") == ("b", "c")
    assert affected(tasks, "d") == ()
    assert downstream_of(tasks)["b"] == ("d",)
    with pytest.raises(ValueError, match="'zz' is not a task"):
        affected(tasks, "zz")


# -- trigger rules, one task at a time ---------------------------------------------------------

RULE_TABLE = [
    # all_success: eager upstream_failed (before skipped), eager skipped
    (R.ALL_SUCCESS, [OK, OK], SCHED),
    (R.ALL_SUCCESS, [OK, RUN], None),
    (R.ALL_SUCCESS, [FAIL, RUN], UF),
    (R.ALL_SUCCESS, [UF, OK], UF),
    (R.ALL_SUCCESS, [CANC, OK], UF),
    (R.ALL_SUCCESS, [SKIP, RUN], SKIP),
    (R.ALL_SUCCESS, [SKIP, FAIL], UF),
    # all_failed
    (R.ALL_FAILED, [FAIL, UF], SCHED),
    (R.ALL_FAILED, [FAIL, CANC], SCHED),
    (R.ALL_FAILED, [FAIL, RUN], None),
    (R.ALL_FAILED, [OK, RUN], SKIP),
    (R.ALL_FAILED, [SKIP, FAIL], SKIP),
    # all_done
    (R.ALL_DONE, [OK, FAIL, SKIP, UF, CANC], SCHED),
    (R.ALL_DONE, [FAIL, S.UP_FOR_RETRY], None),
    (R.ALL_DONE, [OK, PEND], None),
    # one_success: fires at once
    (R.ONE_SUCCESS, [OK, RUN], SCHED),
    (R.ONE_SUCCESS, [FAIL, RUN], None),
    (R.ONE_SUCCESS, [FAIL, SKIP], UF),
    (R.ONE_SUCCESS, [SKIP, SKIP], SKIP),
    # one_failed: fires at once
    (R.ONE_FAILED, [FAIL, RUN], SCHED),
    (R.ONE_FAILED, [UF, RUN], SCHED),
    (R.ONE_FAILED, [OK, RUN], None),
    (R.ONE_FAILED, [OK, SKIP], SKIP),
    # none_failed: succeeded or skipped, all done
    (R.NONE_FAILED, [OK, SKIP], SCHED),
    (R.NONE_FAILED, [SKIP, SKIP], SCHED),
    (R.NONE_FAILED, [OK, S.QUEUED], None),
    (R.NONE_FAILED, [FAIL, RUN], UF),
    (R.NONE_FAILED, [UF, SKIP], UF),
]


@pytest.mark.parametrize(("rule", "upstream", "expected"), RULE_TABLE)
def test_decide_follows_each_trigger_rule(
    rule: TriggerRule, upstream: list[TaskRunState], expected: TaskRunState | None
) -> None:
    assert decide(rule, upstream) is expected


def test_every_rule_has_examples() -> None:
    assert {rule for rule, _, _ in RULE_TABLE} == set(TriggerRule)


@pytest.mark.parametrize("rule", list(TriggerRule))
def test_a_task_without_upstreams_is_scheduled_under_every_rule(rule: TriggerRule) -> None:
    assert decide(rule, []) is SCHED


def test_decide_accepts_rule_and_states_as_plain_strings() -> None:
    assert decide("one_failed", ["failed", "running"]) is SCHED  # type: ignore[arg-type,list-item]


# -- evaluate: a run's tasks at once -----------------------------------------------------------

ETL = [
    node("extract_users"),
    node("extract_orders"),
    node("join", "extract_users", "extract_orders"),
    node("aggregate", "join"),
    node("load", "aggregate"),
]


def test_evaluate_schedules_a_join_when_both_extracts_succeeded() -> None:
    states = run_states(ETL, extract_users=OK, extract_orders=RUN)
    assert evaluate(ETL, states) == Decisions()
    states["extract_orders"] = OK
    assert evaluate(ETL, states) == Decisions(scheduled=("join",))


def test_a_failure_marks_every_downstream_upstream_failed_in_one_call() -> None:
    states = run_states(ETL, extract_users=FAIL, extract_orders=RUN)
    assert evaluate(ETL, states) == Decisions(upstream_failed=("join", "aggregate", "load"))


def test_propagation_stops_at_a_rule_that_still_holds() -> None:
    tasks = [
        *ETL,
        node("cleanup", "load", rule=R.ALL_DONE),
        node("alert", "join", rule=R.ONE_FAILED),
    ]
    states = run_states(tasks, extract_users=FAIL, extract_orders=OK)
    got = evaluate(tasks, states)
    assert got.upstream_failed == ("join", "aggregate", "load")
    assert got.scheduled == ("cleanup", "alert")
    assert got.states()["cleanup"] is SCHED


def test_skips_propagate_through_all_success_and_join_again_at_none_failed() -> None:
    tasks = [node("a"), node("b", "a"), node("c", "b"), node("d", "c", "x", rule=R.NONE_FAILED)]
    tasks.append(node("x"))
    states = run_states(tasks, a=SKIP, x=OK)
    assert evaluate(tasks, states) == Decisions(scheduled=("d",), skipped=("b", "c"))


def test_evaluate_leaves_tasks_that_are_not_pending_alone() -> None:
    # Inconsistent on purpose: evaluate only moves pending tasks, whatever their upstreams say.
    states = run_states(ETL, extract_users=FAIL, extract_orders=OK, join=S.QUEUED)
    assert evaluate(ETL, states) == Decisions()


def test_evaluate_schedules_pending_roots() -> None:
    assert evaluate(ETL, run_states(ETL)).scheduled == ("extract_users", "extract_orders")


def test_evaluate_among_looks_only_there_and_follows_its_own_decisions() -> None:
    states = run_states(ETL, extract_users=OK, extract_orders=FAIL)
    assert evaluate(ETL, states, among=affected(ETL, "extract_orders")) == Decisions(
        upstream_failed=("join", "aggregate", "load")
    )
    assert evaluate(ETL, run_states(ETL), among=["load"]) == Decisions()


def test_evaluate_needs_a_state_for_every_task() -> None:
    with pytest.raises(ValueError, match="no state given for tasks"):
        evaluate(ETL, {"extract_users": OK})
    with pytest.raises(ValueError, match=r"\['ghost'\] are not tasks"):
        evaluate(ETL, run_states(ETL), among=["ghost"])


def test_decisions_are_falsy_when_empty() -> None:
    assert not Decisions()
    assert Decisions(skipped=("x",))


# -- branches ----------------------------------------------------------------------------------

BRANCHY = [
    node("pick"),
    node("fast", "pick"),
    node("slow", "pick"),
    node("slow_report", "slow"),
    node("join", "fast", "slow_report", rule=R.NONE_FAILED),
]


def test_unchosen_branches_are_skipped_and_the_skip_travels_down() -> None:
    states = run_states(BRANCHY, pick=OK)
    got = evaluate(BRANCHY, states, branches={"pick": ["fast"]})
    assert got == Decisions(scheduled=("fast",), skipped=("slow", "slow_report"))
    states.update(got.states(), fast=OK)
    assert evaluate(BRANCHY, states, branches={"pick": ["fast"]}) == Decisions(scheduled=("join",))


def test_a_branch_skips_whatever_the_unchosen_task_rule_is() -> None:
    tasks = [node("pick"), node("a", "pick"), node("b", "pick", rule=R.ALL_DONE)]
    got = evaluate(tasks, run_states(tasks, pick=OK), branches={"pick": ["a"]})
    assert got == Decisions(scheduled=("a",), skipped=("b",))


def test_a_direct_downstream_below_a_chosen_task_is_not_skipped() -> None:
    # Airflow's empty-branch case: branch -> join and branch -> task1 -> join, task1 chosen.
    tasks = [node("branch"), node("task1", "branch"), node("join", "branch", "task1")]
    got = evaluate(tasks, run_states(tasks, branch=OK), branches={"branch": ["task1"]})
    assert got == Decisions(scheduled=("task1",))


def test_a_branch_applies_only_once_its_task_succeeded() -> None:
    states = run_states(BRANCHY, pick=RUN)
    assert evaluate(BRANCHY, states, branches={"pick": ["fast"]}) == Decisions()
    states["pick"] = FAIL
    got = evaluate(BRANCHY, states, branches={"pick": ["fast"]})
    assert got.upstream_failed == ("fast", "slow", "slow_report", "join")


def test_choosing_nothing_skips_every_direct_downstream() -> None:
    got = evaluate(BRANCHY, run_states(BRANCHY, pick=OK), branches={"pick": []})
    # none_failed holds over skipped upstreams alone (Airflow's rule too).
    assert got == Decisions(scheduled=("join",), skipped=("fast", "slow", "slow_report"))


@pytest.mark.parametrize(
    ("branch", "chosen", "field", "says"),
    [
        ("pick", ["slow_report"], "branches.pick", "'slow_report' is not a direct downstream"),
        ("ghost", ["fast"], "branches", "'ghost' is not a task"),
        ("pick", "fast", "branches.pick", "list of task names"),
    ],
)
def test_check_branch_refuses_what_cannot_be_chosen(
    branch: str, chosen: list[str], field: str, says: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        check_branch(BRANCHY, branch, chosen)
    assert caught.value.field == field
    assert says in caught.value.reason


def test_evaluate_checks_branch_choices() -> None:
    with pytest.raises(ValidationError, match="choose among"):
        evaluate(BRANCHY, run_states(BRANCHY, pick=OK), branches={"pick": ["join"]})


# -- properties --------------------------------------------------------------------------------

FAILED_LIKE = {FAIL, UF, CANC}


def holds(rule: TriggerRule, upstream: Sequence[TaskRunState]) -> bool:
    """The rules, stated independently of the implementation."""
    if not upstream:
        return True
    done = all(s in TERMINAL for s in upstream)
    return {
        R.ALL_SUCCESS: all(s is OK for s in upstream),
        R.ALL_FAILED: all(s in FAILED_LIKE for s in upstream),
        R.ALL_DONE: done,
        R.ONE_SUCCESS: any(s is OK for s in upstream),
        R.ONE_FAILED: any(s in FAILED_LIKE for s in upstream),
        R.NONE_FAILED: done and not any(s in FAILED_LIKE for s in upstream),
    }[rule]


def can_still_hold(rule: TriggerRule, upstream: Sequence[TaskRunState]) -> bool:
    """Whether some way of finishing the unfinished upstreams makes the rule hold."""
    open_ = [s for s in upstream if s not in TERMINAL]
    finished = [s for s in upstream if s in TERMINAL]
    return any(holds(rule, finished + [end] * len(open_)) for end in (OK, FAIL, SKIP))


@pytest.mark.parametrize("rule", list(TriggerRule))
def test_decide_agrees_with_the_rule_for_every_upstream_combination(rule: TriggerRule) -> None:
    for size in range(1, 4):
        for upstream in itertools.product(list(S), repeat=size):
            got = decide(rule, upstream)
            if got is SCHED:
                assert holds(rule, upstream), upstream
            elif got is not None:
                assert got in (SKIP, UF)
                assert not can_still_hold(rule, upstream), upstream
            else:
                assert can_still_hold(rule, upstream), upstream
                assert not all(s in TERMINAL for s in upstream), upstream


@st.composite
def dags(draw: st.DrawFn) -> list[Task]:
    size = draw(st.integers(1, 7))
    tasks = []
    for i in range(size):
        ups = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        rule = draw(st.sampled_from(list(TriggerRule)))
        tasks.append(node(f"t{i}", *(f"t{j}" for j in ups), rule=rule))
    return list(draw(st.permutations(tasks)))


@st.composite
def dags_with_states(draw: st.DrawFn) -> tuple[list[Task], dict[str, TaskRunState]]:
    tasks = draw(dags())
    # Mostly pending and terminal states, where the decisions are; now and then any other.
    state = st.sampled_from([PEND, PEND, PEND, OK, OK, FAIL, SKIP, SKIP, UF, CANC, *S])
    return tasks, {task.name: draw(state) for task in tasks}


def applied(states: Mapping[str, TaskRunState], decisions: Decisions) -> dict[str, TaskRunState]:
    return {**states, **decisions.states()}


@given(dags_with_states())
def test_evaluate_schedules_only_where_the_rule_holds(
    case: tuple[list[Task], dict[str, TaskRunState]],
) -> None:
    tasks, states = case
    decisions = evaluate(tasks, states)
    after = applied(states, decisions)
    for task in tasks:
        ups = [after[u] for u in task.upstream]
        if task.name in decisions.scheduled:
            assert holds(task.trigger_rule, ups), (task, ups)
        if task.name in decisions.skipped or task.name in decisions.upstream_failed:
            assert not can_still_hold(task.trigger_rule, ups), (task, ups)


@given(dags_with_states())
def test_evaluate_decides_every_pending_task_whose_upstreams_are_done(
    case: tuple[list[Task], dict[str, TaskRunState]],
) -> None:
    tasks, states = case
    decisions = evaluate(tasks, states)
    decided = decisions.states()
    assert all(states[name] is PEND for name in decided)
    after = applied(states, decisions)
    for task in tasks:
        if after[task.name] is PEND:
            assert not all(after[u] in TERMINAL for u in task.upstream), task
    assert evaluate(tasks, after) == Decisions()  # a fixed point: nothing left to decide


@given(dags_with_states(), st.data())
def test_evaluating_only_the_affected_tasks_decides_the_same(
    case: tuple[list[Task], dict[str, TaskRunState]], data: st.DataObject
) -> None:
    tasks, states = case
    settled = applied(states, evaluate(tasks, states))
    finished = data.draw(st.sampled_from([t.name for t in tasks]))
    settled[finished] = data.draw(st.sampled_from(sorted(TERMINAL)))
    assert evaluate(tasks, settled, among=affected(tasks, finished)) == evaluate(tasks, settled)


@given(dags(), st.data())
def test_unchosen_direct_downstreams_of_a_succeeded_branch_are_skipped(
    tasks: list[Task], data: st.DataObject
) -> None:
    down = downstream_of(tasks)
    branch = data.draw(st.sampled_from([name for name, below in down.items() if below] or [""]))
    if not branch:
        return
    chosen = data.draw(st.lists(st.sampled_from(down[branch]), unique=True))
    states = run_states(tasks, **{branch: OK})
    after = applied(states, evaluate(tasks, states, branches={branch: chosen}))
    below_chosen = set(chosen)
    for name in topological_order(tasks):
        if any(up in below_chosen for up in next(t for t in tasks if t.name == name).upstream):
            below_chosen.add(name)
    for name in down[branch]:
        if name not in below_chosen and states[name] is PEND:
            assert after[name] is SKIP
