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
_RUN_ID, _RUN_LOGICAL, _RUN_CREATED = (
    RUN_COLUMNS.index(name) for name in ("id", "logical_date", "created_at")
)
_TR_ID, _TR_RUN_ID, _TR_CONFIG, _TR_PRIORITY, _TR_DUE_AT, _TR_LOGICAL, _TR_QUEUED = (
    TASK_RUN_COLUMNS.index(name)
    for name in ("id", "run_id", "config", "priority", "due_at", "logical_date", "queued_at")
)
#: Templates whose rows are kept (``_base``), beyond which the kept ones are dropped.
KEPT_TEMPLATES = 256
_Base = tuple[list[object], list[list[object]]]
#: id(template) -> (template, its rows): the template is held, so its id is not reused.
_bases: dict[int, tuple[NewRun, _Base]] = {}


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
    """The rows of enqueued runs: each template is turned into rows once (and kept: the
    enqueuer plans one template per job version), then each copy replaces its ids, configs,
    priority and instants in a copy of those rows."""
    rows = RunRows()
    for c in copies:
        run_row, task_rows = _base(c.template)
        run = run_row.copy()
        run[_RUN_ID] = c.run_id
        at = c.enqueued_at
        if at is not None:
            run[_RUN_LOGICAL] = run[_RUN_CREATED] = at
        rows.runs.append(tuple(run))
        for template_row, task_run_id, config in zip(
            task_rows, c.task_run_ids, c.configs, strict=True
        ):
            row = template_row.copy()
            row[_TR_ID] = task_run_id
            row[_TR_RUN_ID] = c.run_id
            row[_TR_CONFIG] = config
            if c.priority is not None:
                row[_TR_PRIORITY] = c.priority
            if at is not None:
                row[_TR_LOGICAL] = row[_TR_DUE_AT] = at
                if row[_TR_QUEUED] is not None:
                    row[_TR_QUEUED] = at
            if c.due_at is not None:
                row[_TR_DUE_AT] = c.due_at
            rows.task_runs.append(tuple(row))
    return rows


def _base(template: NewRun) -> _Base:
    kept = _bases.get(id(template))
    if kept is not None and kept[0] is template:
        return kept[1]
    base = (list(_run_row(template.run)), [list(_task_run_row(tr)) for tr in template.task_runs])
    if len(_bases) >= KEPT_TEMPLATES:
        _bases.clear()
    _bases[id(template)] = (template, base)
    return base


def _run_row(run: Run) -> Row:
    row = run_to_row(run)
    return tuple(row[name] for name in RUN_COLUMNS)


def _task_run_row(tr: TaskRun) -> Row:
    row = task_run_to_row(tr)
    return tuple(row[name] for name in TASK_RUN_COLUMNS)
