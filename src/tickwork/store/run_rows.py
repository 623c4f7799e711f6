"""Runs and task runs as row tuples for ``Dialect.bulk_insert``: from records, or copied from a
planned template run (enqueue) without building a record per copy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tickwork.core.model import NewRun, Run, TaskRun
from tickwork.ports import RunCopy
from tickwork.store.rows import RUN_COLUMNS, TASK_RUN_COLUMNS, run_to_row, task_run_to_row

Row = tuple[Any, ...]

__all__ = ["RUN_COLUMNS", "TASK_RUN_COLUMNS", "Row", "RunRows", "rows_of", "rows_of_copies"]
_RUN_ID = RUN_COLUMNS.index("id")
_TR_ID, _TR_RUN_ID, _TR_CONFIG, _TR_PRIORITY, _TR_DUE_AT = (
    TASK_RUN_COLUMNS.index(name) for name in ("id", "run_id", "config", "priority", "due_at")
)


@dataclass(slots=True)
class RunRows:
    """Rows for the ``runs`` and ``task_runs`` tables, in RUN_COLUMNS / TASK_RUN_COLUMNS order."""

    runs: list[Row] = field(default_factory=list)
    task_runs: list[Row] = field(default_factory=list)


def rows_of(new_runs: Sequence[NewRun]) -> RunRows:
    """The rows of runs given as records."""
    rows = RunRows()
    for nr in new_runs:
        rows.runs.append(_run_row(nr.run))
        rows.task_runs.extend(_task_run_row(tr) for tr in nr.task_runs)
    return rows


def rows_of_copies(copies: Sequence[RunCopy]) -> RunRows:
    """The rows of enqueued runs: each template is turned into rows once, then each copy
    replaces its ids, configs, priority and due instant in a copy of those rows."""
    rows = RunRows()
    bases: dict[int, tuple[list[object], list[list[object]]]] = {}
    for c in copies:
        base = bases.get(id(c.template))
        if base is None:
            base = bases[id(c.template)] = (
                list(_run_row(c.template.run)),
                [list(_task_run_row(tr)) for tr in c.template.task_runs],
            )
        run_row, task_rows = base
        run_row[_RUN_ID] = c.run_id
        rows.runs.append(tuple(run_row))
        for template_row, task_run_id, config in zip(
            task_rows, c.task_run_ids, c.configs, strict=True
        ):
            row = template_row.copy()
            row[_TR_ID] = task_run_id
            row[_TR_RUN_ID] = c.run_id
            row[_TR_CONFIG] = config
            if c.priority is not None:
                row[_TR_PRIORITY] = c.priority
            if c.due_at is not None:
                row[_TR_DUE_AT] = c.due_at
            rows.task_runs.append(tuple(row))
    return rows


def _run_row(run: Run) -> Row:
    row = run_to_row(run)
    return tuple(row[name] for name in RUN_COLUMNS)


def _task_run_row(tr: TaskRun) -> Row:
    row = task_run_to_row(tr)
    return tuple(row[name] for name in TASK_RUN_COLUMNS)
