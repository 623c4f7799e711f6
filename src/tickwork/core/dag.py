"""DAG workflows: graph order, cycles, trigger rules and readiness. Pure: data in, data out.

A job's tasks name their upstreams; :func:`evaluate` decides, from the state of every task run
of one run, which ``pending`` task runs move on. The engine calls it when a task run finishes,
with :func:`affected` naming the only tasks worth looking at, so no periodic scan of every run
is needed.

Trigger rules follow Airflow's (``TriggerRuleDep``), over the states of a task's direct
upstreams. "Failed" below means ``failed``, ``upstream_failed`` or ``cancelled`` (a cancelled
upstream did not produce its output either); "done" means any terminal state.

==============  ===============================  ==========================================
rule            scheduled when                   decided otherwise, as soon as it is sure
==============  ===============================  ==========================================
all_success     every upstream succeeded         any failed -> upstream_failed; else any
                                                 skipped -> skipped (without waiting)
all_failed      every upstream failed            any succeeded or skipped -> skipped
all_done        every upstream is done           never
one_success     one upstream succeeded (at once) all done, none succeeded: all skipped ->
                                                 skipped, else upstream_failed
one_failed      one upstream failed (at once)    all done, none failed -> skipped
none_failed     all done, none failed            any failed -> upstream_failed
==============  ===============================  ==========================================

A task without upstreams holds under every rule. Decisions propagate in the same call: a task
marked ``skipped`` or ``upstream_failed`` is itself a done upstream for its downstreams.

Branching: a task that succeeded may have chosen which of its direct downstreams to follow
(``branches``). Its other direct downstreams become ``skipped`` whatever their rule, except a
task that is also downstream of a chosen one (Airflow's ``skip_all_except``: in
``branch -> join`` plus ``branch -> a -> join`` with ``a`` chosen, ``join`` waits for ``a``).
What lies further down then follows its own rule: ``all_success`` skips on, while
``none_failed`` or ``all_done`` joins the paths again.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tickwork.core.errors import ValidationError
from tickwork.core.model import Task, TaskRunState, TriggerRule

__all__ = [
    "Decisions",
    "TriggerRule",
    "affected",
    "check_branch",
    "decide",
    "downstream_of",
    "evaluate",
    "find_cycle",
    "topological_order",
]

S = TaskRunState
R = TriggerRule

_DONE = frozenset({S.SUCCESS, S.FAILED, S.CANCELLED, S.SKIPPED, S.UPSTREAM_FAILED})
_FAILED = frozenset({S.FAILED, S.UPSTREAM_FAILED, S.CANCELLED})


# -- the graph ---------------------------------------------------------------------------------


def downstream_of(tasks: Sequence[Task]) -> dict[str, tuple[str, ...]]:
    """Each task's direct downstreams, in the order the tasks are declared."""
    down: dict[str, list[str]] = {task.name: [] for task in tasks}
    for task in tasks:
        for up in task.upstream:
            if up in down:
                down[up].append(task.name)
    return {name: tuple(dict.fromkeys(names)) for name, names in down.items()}


def find_cycle(tasks: Sequence[Task]) -> tuple[str, ...]:
    """A cycle as a path that returns to its start, such as ``("a", "b", "c", "a")``, where each
    task is an upstream of the next; ``()`` when the tasks form a DAG. Unknown upstream names
    are ignored (validation reports them on their own)."""
    down = downstream_of(tasks)
    done: set[str] = set()
    for start in down:
        if start in done:
            continue
        # Iterative depth-first search: a deep chain must not hit the recursion limit.
        path, on_path = [start], {start}
        stack = [iter(down[start])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if nxt in on_path:
                return (*path[path.index(nxt) :], nxt)
            if nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(down[nxt]))
    return ()


def topological_order(tasks: Sequence[Task]) -> tuple[str, ...]:
    """Task names with every upstream before its downstreams; among tasks free to go, the
    declaration order is kept. Raises ``ValidationError`` on a cycle."""
    index = {task.name: i for i, task in enumerate(tasks)}
    down = downstream_of(tasks)
    waiting = {task.name: sum(1 for up in set(task.upstream) if up in index) for task in tasks}
    ready = [index[name] for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = tasks[heapq.heappop(ready)].name
        order.append(name)
        for nxt in down[name]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, index[nxt])
    if len(order) < len(tasks):
        raise cycle_error(find_cycle(tasks))
    return tuple(order)


def cycle_error(cycle: Sequence[str]) -> ValidationError:
    """The error a cyclic graph gets, with the cycle printed."""
    return ValidationError(
        "tasks", f"the tasks form a cycle ({' -> '.join(cycle)}); upstreams must form a DAG"
    )


def affected(tasks: Sequence[Task], finished_task: str) -> tuple[str, ...]:
    """The tasks to re-evaluate when ``finished_task`` reaches a terminal state: its direct
    downstreams. Pass them to :func:`evaluate` as ``among``; it follows any decision that
    makes a task done further down by itself."""
    down = downstream_of(tasks)
    if finished_task not in down:
        raise ValueError(f"{finished_task!r} is not a task of this job")
    return down[finished_task]


# -- trigger rules -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Tally:
    total: int
    success: int
    skipped: int
    failed: int
    done: int

    @property
    def all_done(self) -> bool:
        return self.done == self.total


def _all_success(t: _Tally) -> TaskRunState | None:
    if t.failed:
        return S.UPSTREAM_FAILED
    if t.skipped:
        return S.SKIPPED
    return S.SCHEDULED if t.success == t.total else None


def _all_failed(t: _Tally) -> TaskRunState | None:
    if t.success or t.skipped:
        return S.SKIPPED
    return S.SCHEDULED if t.failed == t.total else None


def _all_done(t: _Tally) -> TaskRunState | None:
    return S.SCHEDULED if t.all_done else None


def _one_success(t: _Tally) -> TaskRunState | None:
    if t.success:
        return S.SCHEDULED
    if not t.all_done:
        return None
    return S.SKIPPED if t.skipped == t.total else S.UPSTREAM_FAILED


def _one_failed(t: _Tally) -> TaskRunState | None:
    if t.failed:
        return S.SCHEDULED
    return S.SKIPPED if t.all_done else None


def _none_failed(t: _Tally) -> TaskRunState | None:
    if t.failed:
        return S.UPSTREAM_FAILED
    return S.SCHEDULED if t.all_done else None


_RULES: dict[TriggerRule, Callable[[_Tally], TaskRunState | None]] = {
    R.ALL_SUCCESS: _all_success,
    R.ALL_FAILED: _all_failed,
    R.ALL_DONE: _all_done,
    R.ONE_SUCCESS: _one_success,
    R.ONE_FAILED: _one_failed,
    R.NONE_FAILED: _none_failed,
}


def decide(rule: TriggerRule, upstream: Iterable[TaskRunState]) -> TaskRunState | None:
    """What a ``pending`` task with ``rule`` becomes, given its direct upstreams' states:
    ``scheduled``, ``skipped``, ``upstream_failed``, or ``None`` (not decided yet).
    The table is in the module docstring."""
    states = list(upstream)
    if not states:
        return S.SCHEDULED
    tally = _Tally(
        total=len(states),
        success=sum(state == S.SUCCESS for state in states),
        skipped=sum(state == S.SKIPPED for state in states),
        failed=sum(state in _FAILED for state in states),
        done=sum(state in _DONE for state in states),
    )
    return _RULES[TriggerRule(rule)](tally)


# -- readiness ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decisions:
    """What :func:`evaluate` decided for ``pending`` task runs, each in topological order."""

    scheduled: tuple[str, ...] = ()
    upstream_failed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    def states(self) -> dict[str, TaskRunState]:
        """Task name -> new state, for every decision."""
        return {
            **dict.fromkeys(self.scheduled, S.SCHEDULED),
            **dict.fromkeys(self.upstream_failed, S.UPSTREAM_FAILED),
            **dict.fromkeys(self.skipped, S.SKIPPED),
        }

    def __bool__(self) -> bool:
        return bool(self.scheduled or self.upstream_failed or self.skipped)


def evaluate(
    tasks: Sequence[Task],
    states: Mapping[str, TaskRunState],
    *,
    branches: Mapping[str, Collection[str]] | None = None,
    among: Iterable[str] | None = None,
) -> Decisions:
    """Decide which ``pending`` tasks become ``scheduled``, ``skipped`` or ``upstream_failed``.

    ``tasks`` is a validated DAG, ``states`` the current state of every task's run, and
    ``branches`` maps a branch task to the direct downstreams it chose (applied once that task
    succeeded). With ``among`` (say, :func:`affected` of the task that just finished) only those
    tasks are looked at, plus whatever their decisions reach; without it, every task. The rules
    and the branching are described in the module docstring. Raises ``ValueError`` when a task
    has no state, ``ValidationError`` for a branch choice that is not a direct downstream.
    """
    missing = [task.name for task in tasks if task.name not in states]
    if missing:
        raise ValueError(f"no state given for tasks {missing}")
    order = topological_order(tasks)
    rank = {name: i for i, name in enumerate(order)}
    by_name = {task.name: task for task in tasks}
    down = downstream_of(tasks)
    unchosen = _unchosen(tasks, states, branches or {}, down)
    current = dict(states)
    # Visit in topological order, so a task is decided only after all its upstreams were.
    todo = _ranks(order if among is None else among, rank)
    decided: dict[TaskRunState, list[str]] = {S.SCHEDULED: [], S.UPSTREAM_FAILED: [], S.SKIPPED: []}
    while todo:
        name = order[heapq.heappop(todo)]
        if current[name] != S.PENDING:
            continue
        task = by_name[name]
        if name in unchosen:
            new: TaskRunState | None = S.SKIPPED
        else:
            new = decide(task.trigger_rule, (current[up] for up in task.upstream))
        if new is None:
            continue
        current[name] = new
        decided[new].append(name)
        if new is not S.SCHEDULED:  # a done task is an input its downstreams may now decide on
            for nxt in down[name]:
                heapq.heappush(todo, rank[nxt])
    return Decisions(
        scheduled=tuple(decided[S.SCHEDULED]),
        upstream_failed=tuple(decided[S.UPSTREAM_FAILED]),
        skipped=tuple(decided[S.SKIPPED]),
    )


def check_branch(
    tasks: Sequence[Task], branch_task: str, chosen: Collection[str]
) -> frozenset[str]:
    """The branch choice of ``branch_task`` as a set, or ``ValidationError`` when a chosen name
    is not one of its direct downstreams."""
    down = downstream_of(tasks)
    if branch_task not in down:
        raise ValidationError("branches", f"{branch_task!r} is not a task of this job")
    if isinstance(chosen, str):
        raise ValidationError(f"branches.{branch_task}", "must be a list of task names")
    options = down[branch_task]
    for name in chosen:
        if name not in options:
            raise ValidationError(
                f"branches.{branch_task}",
                f"{name!r} is not a direct downstream of {branch_task!r}; "
                f"choose among {sorted(options)}",
            )
    return frozenset(chosen)


def _ranks(names: Iterable[str], rank: Mapping[str, int]) -> list[int]:
    names = tuple(names)
    unknown = [name for name in names if name not in rank]
    if unknown:
        raise ValueError(f"{unknown} are not tasks of this job")
    todo = list({rank[name] for name in names})
    heapq.heapify(todo)
    return todo


def _unchosen(
    tasks: Sequence[Task],
    states: Mapping[str, TaskRunState],
    branches: Mapping[str, Collection[str]],
    down: Mapping[str, tuple[str, ...]],
) -> frozenset[str]:
    """Direct downstreams of succeeded branch tasks that neither were chosen nor lie below a
    chosen one."""
    skip: set[str] = set()
    for branch, chosen in branches.items():
        keep = check_branch(tasks, branch, chosen)
        if states.get(branch) != S.SUCCESS:
            continue
        keep |= _descendants(keep, down)
        skip.update(name for name in down[branch] if name not in keep)
    return frozenset(skip)


def _descendants(roots: Iterable[str], down: Mapping[str, tuple[str, ...]]) -> set[str]:
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        for nxt in down[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen
