"""Completion: an attempt's outcome written to its task run, its attempt history and its run.

``complete`` locks the running task runs first (``Dialect.lock_running``), so the attempt
history matches exactly the updates applied, then writes them in one go
(``Dialect.write_outcomes``); a run of several task runs advances its DAG
(``runs.refresh_runs``) and queues what became ready (``dispatch.queue_ready``). The values
written are decided here once, for every dialect; ``pg_hot`` does the same in one statement
and takes the outcome's part from ``outcome_values``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection

from tickwork.core.model import Outcome, TaskRunState
from tickwork.core.states import OUTCOMES, TERMINAL, derive_run_state
from tickwork.ports import Completion, TaskKey
from tickwork.store.dialect import Dialect
from tickwork.store.dispatch import queue_ready
from tickwork.store.runs import refresh_runs

S = TaskRunState


def outcomes_by_key(outcomes: Sequence[Outcome]) -> dict[TaskKey, Outcome]:
    """The outcomes by task run key, the first one given winning; refuses a state an
    attempt cannot end in."""
    for o in outcomes:
        if o.state not in OUTCOMES:
            raise ValueError(f"outcome state {o.state.value!r} is not reachable from running")
    return {(o.task_run_id, o.attempt): o for o in reversed(outcomes)}


def complete(conn: Connection, dialect: Dialect, outcomes: Sequence[Outcome]) -> Completion:
    by_key = outcomes_by_key(outcomes)
    # Lock the rows first so the attempt history matches exactly the updates applied.
    locked = dialect.lock_running(conn, list(by_key))
    applied = [(row, by_key[(row["id"], row["attempt"])]) for row in locked]
    if not applied:
        return Completion(applied=[])
    alone = [single_run_values(row, o) for row, o in applied if row["siblings"] == 1]
    dialect.write_outcomes(
        conn,
        [completion_values(row, o) for row, o in applied],
        [attempt_values(row, o) for row, o in applied],
        alone,
    )
    finished = max(o.finished_at for _, o in applied)
    family = [row["run_id"] for row, _ in applied if row["siblings"] != 1]
    # A run of one task run was running until this outcome: it ended if the outcome did.
    ended = Counter(v["state"] for v in alone if v["finished_at"] is not None)
    ready = refresh_runs(conn, family, finished, ended=ended)
    queued = queue_ready(conn, ready, finished)
    return Completion(
        applied=[row["id"] for row, _ in applied],
        queued=queued,
        waiting=len(ready) - len(queued),
        pools_freed=any(row["pool"] is not None for row, _ in applied),
        runs_finished=dict(ended),
    )


def single_run_values(row: Mapping[Any, Any], o: Outcome) -> dict[str, Any]:
    state = derive_run_state([o.state])
    return {
        "key_id": row["run_id"],
        "state": state.value,
        "started_at": o.started_at or row["started_at"],
        "finished_at": o.finished_at if state in _RUN_FINISHED else None,
    }


_RUN_FINISHED = frozenset(derive_run_state([s]) for s in TERMINAL)

#: What completion reads of a task run it locks (not the JSON spec columns: decoding them
#: is wasted); the dialect adds ``siblings``, how many task runs its run has (one: the
#: run's state follows from the outcome alone).
LOCKED = ("id", "attempt", "run_id", "due_at", "started_at", "heartbeat_at", "worker_id", "pool")

#: The task-run columns an outcome writes (``completion_values``).
COMPLETED_COLUMNS = (
    "state",
    "attempt",
    "due_at",
    "started_at",
    "finished_at",
    "heartbeat_at",
    "worker_id",
    "error",
    "exit_code",
    "result",
)


def completion_values(row: Mapping[Any, Any], o: Outcome) -> dict[str, Any]:
    retry = o.state == S.UP_FOR_RETRY
    return {
        "key_id": row["id"],
        "key_attempt": row["attempt"],
        "state": o.state.value,
        "attempt": row["attempt"] + 1 if retry else row["attempt"],
        "due_at": (o.retry_at or o.finished_at) if retry else row["due_at"],
        # A retry's fields describe the attempt to come; the one just finished is history.
        "started_at": None if retry else (o.started_at or row["started_at"]),
        "finished_at": None if retry else o.finished_at,
        "heartbeat_at": None if retry else row["heartbeat_at"],
        "worker_id": None if retry else (o.worker_id or row["worker_id"]),
        "error": o.error,
        "exit_code": o.exit_code,
        "result": o.result if o.state == S.SUCCESS else None,
    }


def outcome_values(o: Outcome) -> dict[str, Any]:
    """What ``completion_values``, ``attempt_values`` and ``single_run_values`` take from
    the outcome alone, for a statement that locks and writes in one (``pg_hot``) and takes
    the rest from the locked row: ``due_at`` is None unless a retry sets it, ``retry``
    clears the attempt's fields from the task run. (Both ways are checked to write the same
    rows: tests/adapters/test_store_hot_direct.py.)"""
    retry = o.state == S.UP_FOR_RETRY
    run_state = derive_run_state([o.state])
    return {
        "id": o.task_run_id,
        "attempt": o.attempt,
        "state": o.state.value,
        "retry": retry,
        "due_at": (o.retry_at or o.finished_at) if retry else None,
        "started_at": o.started_at,
        "finished_at": o.finished_at,
        "worker_id": o.worker_id,
        "error": o.error,
        "exit_code": o.exit_code,
        "result": o.result if o.state == S.SUCCESS else None,
        "run_state": run_state.value,
        "run_finished_at": o.finished_at if run_state in _RUN_FINISHED else None,
    }


def merged(first: Completion, then: Completion) -> Completion:
    """One ``Completion`` of two parts of a batch written apart."""
    finished = Counter(first.runs_finished) + Counter(then.runs_finished)
    return Completion(
        applied=first.applied + then.applied,
        queued=first.queued + then.queued,
        waiting=first.waiting + then.waiting,
        pools_freed=first.pools_freed or then.pools_freed,
        runs_finished=dict(finished),
    )


def attempt_values(row: Mapping[Any, Any], o: Outcome) -> dict[str, Any]:
    return {
        "task_run_id": row["id"],
        "attempt": row["attempt"],
        "state": o.state.value,
        "started_at": o.started_at or row["started_at"],
        "finished_at": o.finished_at,
        "error": o.error,
        "exit_code": o.exit_code,
        "worker_id": o.worker_id or row["worker_id"],
    }
