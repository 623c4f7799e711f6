"""``Hooks.fire_alert`` tells its caller whether an alert callback ran to its end: what the
alert watcher marks done (or fires again later)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tickwork.core.model import Callback, CallbackEvent, RunState, TaskKind
from tickwork.hooks import AlertContext, Hooks

AT = datetime(2026, 3, 1, 12, tzinfo=UTC)
CONTEXT = AlertContext(
    event=CallbackEvent.ON_MISSED,
    job_name="j",
    run_id="r1",
    logical_date=AT,
    state=RunState.QUEUED,
    limit_seconds=60.0,
    late_seconds=5.0,
    started_at=None,
    finished_at=None,
    fired_at=AT,
)


def target(name: str) -> Callback:
    return Callback(TaskKind.PYTHON, {"target": f"tests.fixtures.callbacks:{name}"})


@pytest.mark.parametrize("name", ["record_alert", "fail", "not_there"])
async def test_a_callback_that_ran_or_failed_for_good_is_done(name: str) -> None:
    told: list[bool] = []
    hooks = Hooks()
    hooks.fire_alert(target(name), CONTEXT, told.append)
    assert told == []  # only scheduled
    await hooks.close(5.0)
    assert told == [True]


async def test_a_dropped_or_cancelled_callback_is_not_done() -> None:
    told: list[bool] = []
    hooks = Hooks(backlog=1)
    hooks.fire_alert(target("hang_async"), CONTEXT, told.append)
    hooks.fire_alert(target("record_alert"), CONTEXT, told.append)  # over the backlog
    assert told == [False]
    await hooks.close(0.0)  # the hanging one is cancelled
    assert told == [False, False]
    hooks.fire_alert(target("record_alert"), CONTEXT, told.append)  # closed: dropped
    assert told == [False, False, False]
