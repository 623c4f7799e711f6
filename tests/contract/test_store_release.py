"""``release``: a draining worker hands back task runs it claimed ahead and never started."""

from __future__ import annotations

from tests.contract.factory import T0, at, key, make_job, make_run
from tickwork.core.model import RunState, TaskRunState
from tickwork.store import SqlStore


async def test_release_puts_an_unstarted_claim_back_in_the_queue_without_an_attempt(
    store: SqlStore,
) -> None:
    job = make_job("job")
    new = make_run(job, state=TaskRunState.QUEUED)
    await store.create_jobs([(job, [new])])
    tr = new.task_runs[0]
    await store.claim([key(tr)], "w1", T0)

    assert await store.release([key(tr)], "w2", at(1)) == 0  # not its claim
    assert await store.release([key(tr)], "w1", at(1)) == 1

    detail = await store.get_run(new.run.id)
    assert detail is not None
    released = detail.task_runs[0]
    assert (released.state, released.attempt, released.worker_id) == (
        TaskRunState.QUEUED,
        1,
        None,
    )
    assert released.queued_at == at(1) and released.started_at is None
    assert detail.attempts == ()
    assert detail.run.state is RunState.QUEUED
    assert [t.id for t in await store.queued_task_runs(at(1), 10)] == [tr.id]
    assert len(await store.claim([key(tr)], "w2", at(2))) == 1  # another worker can take it
