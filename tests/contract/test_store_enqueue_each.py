"""``Store.enqueue_each``: several independent enqueues in one transaction, each entry checked
on its own (SQLite, and PostgreSQL by its one statement and by its transaction)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from tests.contract.factory import T0, make_job, make_run, shell_task
from tickwork.core.errors import Conflict
from tickwork.core.model import Job, NewRun, RunTrigger, TaskRunState
from tickwork.ports import EnqueueEntry, JobChanged, KeyReceipt, KeyTaken, RunCopy
from tickwork.store import SqlStore


def _entry(template: NewRun, run_id: str, job: Job, key: str | None = None) -> EnqueueEntry:
    copy = RunCopy(
        template=template,
        run_id=run_id,
        task_run_ids=tuple(f"{run_id}-{n}" for n in range(len(template.task_runs))),
        configs=tuple(tr.config for tr in template.task_runs),
    )
    receipt = None if key is None else _receipt(key)
    return EnqueueEntry([copy], receipt, job)


def _receipt(key: str) -> KeyReceipt:
    return KeyReceipt("tok", key, "hash", 201, f'{{"k":"{key}"}}', T0, T0 + timedelta(days=1))


async def _run_ids(store: SqlStore, job: Job) -> list[str]:
    return sorted(r.id for r in (await store.list_runs(job_id=job.id, limit=100)).runs)


async def _flow(store: SqlStore) -> tuple[Job, NewRun]:
    job = make_job("flow", tasks=[shell_task("a"), shell_task("b", upstream=["a"])])
    await store.create_jobs([(job, [])])
    return job, make_run(job, T0, state=TaskRunState.QUEUED, trigger=RunTrigger.ENQUEUE)


@pytest.mark.parametrize("keyed", [False, True])
async def test_enqueue_each_leaves_out_only_the_entry_planned_from_an_old_job(
    store: SqlStore, keyed: bool
) -> None:
    job, template = await _flow(store)
    other = make_job("other")
    await store.create_jobs([(other, [])])
    other_template = make_run(other, T0, trigger=RunTrigger.ENQUEUE)
    changed = dataclasses.replace(job, priority=5, updated_at=T0 + timedelta(seconds=1))
    assert await store.update_job(changed, job.updated_at, reschedule=False)
    entries = [
        _entry(template, "new-1", changed, "k1" if keyed else None),
        _entry(template, "stale", job, "k2" if keyed else None),  # the version before
        _entry(other_template, "other-1", other),
        _entry(template, "new-2", changed),
    ]
    outcomes = await store.enqueue_each(entries)
    assert [o is None for o in outcomes] == [True, False, True, True]
    assert isinstance(outcomes[1], JobChanged)
    assert await _run_ids(store, job) == ["new-1", "new-2"]
    assert await _run_ids(store, other) == ["other-1"]
    detail = await store.get_run("new-2")
    assert detail is not None
    assert sorted(tr.id for tr in detail.task_runs) == ["new-2-0", "new-2-1"]
    if keyed:
        assert await store.get_key("tok", "k1", T0) is not None
        assert await store.get_key("tok", "k2", T0) is None  # left out: its key too


async def test_enqueue_each_leaves_out_an_entry_whose_key_is_taken(store: SqlStore) -> None:
    job, template = await _flow(store)
    assert await store.enqueue_each([_entry(template, "first", job, "k")]) == [None]
    outcomes = await store.enqueue_each(
        [_entry(template, "again", job, "k"), _entry(template, "fresh", job, "k-new")]
    )
    taken = outcomes[0]
    assert isinstance(taken, KeyTaken) and taken.held.body == '{"k":"k"}'
    assert outcomes[1] is None
    assert await _run_ids(store, job) == ["first", "fresh"]


async def test_enqueue_each_of_a_deleted_job_writes_nothing(store: SqlStore) -> None:
    job, template = await _flow(store)
    await store.delete_job(job.id, T0 + timedelta(seconds=1))
    outcomes = await store.enqueue_each([_entry(template, "late", job)])
    assert isinstance(outcomes[0], JobChanged)
    assert await store.get_run("late") is None


async def test_enqueue_each_of_a_taken_run_id_fails_the_whole_transaction(
    store: SqlStore,
) -> None:
    job, template = await _flow(store)
    await store.enqueue_each([_entry(template, "taken", job)])
    with pytest.raises(Conflict):
        await store.enqueue_each([_entry(template, "good", job), _entry(template, "taken", job)])
    assert await _run_ids(store, job) == ["taken"]  # nothing of that transaction


async def test_enqueue_each_writes_a_large_group_with_its_values_as_given(store: SqlStore) -> None:
    # 40 runs of two task runs: ~2,800 values in one statement on PostgreSQL, its placeholders
    # numbered by us (pg_enqueue.group_statement); values that look like placeholders stay text.
    job, template = await _flow(store)
    entries = []
    for n in range(40):
        entry = _entry(template, f"r{n:02d}", job)
        copy = dataclasses.replace(
            entry.copies[0], configs=({"command": f"echo %s $1 {n}"}, {"command": f"$2 %% {n}"})
        )
        entries.append(EnqueueEntry([copy], None, job))
    assert await store.enqueue_each(entries) == [None] * 40
    assert await _run_ids(store, job) == [f"r{n:02d}" for n in range(40)]
    detail = await store.get_run("r17")
    assert detail is not None
    configs = {tr.id: dict(tr.config) for tr in detail.task_runs}
    assert configs == {"r17-0": {"command": "echo %s $1 17"}, "r17-1": {"command": "$2 %% 17"}}
