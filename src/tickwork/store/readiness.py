"""DAG readiness, evaluated in the transaction that changed a task run's state.

Whenever task runs of a run change state, ``refresh_runs`` hands the run's task runs to
:func:`advance`, which asks the pure core (``tickwork.core.dag.evaluate``) which ``pending``
ones may now go: ``scheduled`` (due now), ``skipped`` or ``upstream_failed`` (finished now,
transitively). Nothing scans runs periodically: readiness follows the event that caused it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.dag import Decisions, evaluate
from tickwork.core.model import Task, TaskKind, TaskRunState, TriggerRule
from tickwork.core.refs import BRANCH_KEY
from tickwork.store.common import param
from tickwork.store.schema import task_runs

S = TaskRunState


#: What ``refresh_runs`` reads of each task run. A result is read only when it is a branch
#: choice: results can be large, and nothing else here needs them.
CHILD_COLUMNS = (
    task_runs.c.id,
    task_runs.c.run_id,
    task_runs.c.task_name,
    task_runs.c.state,
    task_runs.c.upstream,
    task_runs.c.trigger_rule,
    task_runs.c.started_at,
    task_runs.c.finished_at,
    sa.case(
        (task_runs.c.result.like('{"' + BRANCH_KEY + '"%'), task_runs.c.result), else_=None
    ).label("branch"),
)

Child = MutableMapping[str, Any]


def advance(conn: Connection, children: Sequence[Child], now: datetime) -> list[str]:
    """Apply the trigger rules to one run's pending task runs; update ``children`` in place
    to the new states and return the ids of the task runs that became ``scheduled``."""
    if len(children) < 2 or not any(c["state"] == S.PENDING.value for c in children):
        return []
    decisions = _decide(children)
    if not decisions:
        return []
    by_name = {c["task_name"]: c for c in children}
    changes = []
    for name, state in decisions.states().items():
        child = by_name[name]
        child["state"] = state.value
        if state is not S.SCHEDULED:
            child["finished_at"] = now
        changes.append(_change(child, state, now))
    conn.execute(_ADVANCE, changes)
    return [by_name[name]["id"] for name in decisions.scheduled]


def _decide(children: Sequence[Child]) -> Decisions:
    tasks = [
        Task(
            name=c["task_name"],
            kind=TaskKind.SHELL,  # unused: readiness looks at names, edges and rules only
            config={},
            upstream=tuple(c["upstream"]),
            trigger_rule=TriggerRule(c["trigger_rule"]),
        )
        for c in children
    ]
    states = {c["task_name"]: S(c["state"]) for c in children}
    return evaluate(tasks, states, branches=_branches(children))


def _branches(children: Sequence[Child]) -> Mapping[str, list[str]]:
    """Branch choices of succeeded tasks. A name that is not a direct downstream was refused
    when the result was recorded (``check_branch_result``); here it is simply ignored."""
    chosen: dict[str, list[str]] = {}
    for c in children:
        if c["branch"] is None or c["state"] != S.SUCCESS.value:
            continue
        names = branch_choice(json.loads(c["branch"]))
        if names is not None:
            down = {d["task_name"] for d in children if c["task_name"] in d["upstream"]}
            chosen[c["task_name"]] = [n for n in names if n in down]
    return chosen


def branch_choice(result: object) -> list[str] | None:
    """The downstream names a ``{"$branch": [...]}`` result chooses; None if it is not one."""
    if not isinstance(result, dict) or BRANCH_KEY not in result:
        return None
    value = result[BRANCH_KEY]
    names = [value] if isinstance(value, str) else value
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        return names
    return None


def _change(child: Child, state: TaskRunState, now: datetime) -> dict[str, Any]:
    scheduled = state is S.SCHEDULED
    return {
        "p_key_id": child["id"],
        "p_state": state.value,
        "p_due_at": now if scheduled else None,
        "p_finished_at": None if scheduled else now,
    }


_ADVANCE = (
    sa.update(task_runs)
    .where(task_runs.c.id == sa.bindparam("p_key_id"), task_runs.c.state == S.PENDING.value)
    .values(
        state=param(task_runs.c.state),
        due_at=sa.func.coalesce(param(task_runs.c.due_at), task_runs.c.due_at),
        finished_at=param(task_runs.c.finished_at),
    )
)
