"""Re-sending queued task runs nobody claimed: at most once per backoff period, never while
their messages still wait unread, and at once after the broker lost its data."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from tests.helpers import FakeClock, shell_task, utc
from tickwork.app.records import JobSpec
from tickwork.app.services import Services
from tickwork.core.model import Schedule, ScheduleKind, TaskRun
from tickwork.ids import new_id
from tickwork.ports import Delivery, ForgetfulBroker, Store
from tickwork.scheduler.loop import Scheduler, SchedulerConfig

T0 = utc(2026, 3, 2, 10, 0)


class LosingBroker:
    """A broker whose server keeps nothing (no worker, messages lost), or keeps all unread
    (``keeps``): counts what was published, per task run, and can say it forgot."""

    def __init__(self, *, keeps: bool = False) -> None:
        self.sent: Counter[str] = Counter()
        self.keeps = keeps
        self.held: list[Delivery] = []
        self.lost_data = False

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        self.sent.update(d.task_run_id for d in deliveries)
        if self.keeps:
            self.held.extend(deliveries)

    async def publish_at(self, items: Sequence[tuple[Delivery, datetime]]) -> None:
        await self.publish([d for d, _ in items])

    async def consume(
        self, queues: Sequence[str], max_items: int, timeout: float
    ) -> list[Delivery]:
        return []

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        return None

    async def depths(self) -> dict[str, int]:
        return {"default": len(self.held)}

    async def forgot(self) -> bool:
        lost, self.lost_data = self.lost_data, False
        return lost

    async def close(self) -> None:
        return None


async def queued_runs(store: Store, broker: LosingBroker, clock: FakeClock, n: int) -> None:
    services = Services(store, broker, clock=clock)
    for i in range(n):
        now = Schedule(kind=ScheduleKind.NOW)
        await services.create_job(JobSpec(f"j{i}", now, (shell_task("true"),)))


def scheduler(store: Store, broker: LosingBroker, clock: FakeClock) -> Scheduler:
    return Scheduler(
        store, broker, clock=clock, rand=random.random, make_id=new_id, config=SchedulerConfig()
    )


async def run_for(s: Scheduler, clock: FakeClock, seconds: int) -> None:
    start = clock.now
    for step in range(0, seconds + 1, 2):  # a housekeeping pass every 2 s, as in production
        clock.now = start + timedelta(seconds=step)
        await s.tick(clock.now)


async def test_unclaimed_runs_are_re_sent_once_per_doubling_period(store: Store) -> None:
    clock = FakeClock(T0)
    broker = LosingBroker()  # no worker ever reads; the messages are gone
    await queued_runs(store, broker, clock, 20)
    assert set(broker.sent.values()) == {1}

    await run_for(scheduler(store, broker, clock), clock, 600)

    # Sent, then re-sent 30, 60, 120, 240 and 480 s after queueing (the wait doubling from
    # 30 s), not on every 2 s pass (300 times).
    assert set(broker.sent.values()) == {6}, broker.sent


class RowsRead:
    """The store, counting the reconciler's reads of whole queued task runs."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.reads = 0

    async def queued_task_runs(self, queued_before: datetime, limit: int) -> list[TaskRun]:
        self.reads += 1
        return await self._store.queued_task_runs(queued_before, limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_nothing_is_re_sent_while_the_messages_wait_unread(store: Store) -> None:
    clock = FakeClock(T0)
    broker = LosingBroker(keeps=True)  # no worker up: 500 runs sat in the broker for 42 s
    await queued_runs(store, broker, clock, 50)
    counted = RowsRead(store)
    s = scheduler(cast(Store, counted), broker, clock)

    await run_for(s, clock, 300)

    assert len(broker.held) == 50  # one message per queued run, however long nobody reads
    # ... and their rows are not read either: the counts per queue said nothing is missing.
    assert counted.reads == 0
    broker.held.pop()  # one message lost: that queue's rows are read, the run re-sent
    clock.now += timedelta(seconds=2)
    sent = sum(broker.sent.values())
    await s.tick(clock.now)
    assert counted.reads == 1 and sum(broker.sent.values()) == sent + 50


async def test_a_broker_that_lost_its_data_is_re_sent_everything_at_once(store: Store) -> None:
    clock = FakeClock(T0)
    broker = LosingBroker()
    await queued_runs(store, broker, clock, 5)
    s = scheduler(store, broker, clock)
    assert isinstance(broker, ForgetfulBroker)
    await s.tick(clock.now)
    assert set(broker.sent.values()) == {1}

    broker.lost_data = True
    clock.now += timedelta(seconds=1)
    await s.tick(clock.now)  # long before the 30 s re-send

    assert set(broker.sent.values()) == {2}
