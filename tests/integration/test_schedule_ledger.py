"""The schedule ledger over a real store (SQLite; the runs come through ``list_runs``, whose
contract suite covers PostgreSQL): a month of a daily job run
by the real scheduler shows only ``ran``; an outage without catch-up shows ``skipped``; ticks
nobody acted on are ``missed`` and counted by ``missed_ticks``."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta

from tests.helpers import make_job, shell_task, utc
from tests.integration.test_backfills import DAILY, Rig
from tickwork.core.ledger import TickStatus
from tickwork.ports import Store

MONTH_START = utc(2026, 3, 1)


async def _daily_job(rig: Rig, name: str = "daily", *, catchup: bool = False) -> None:
    job = make_job(
        name, now=MONTH_START, schedule=DAILY, task=shell_task("true"), catchup=catchup,
        next_fire_at=utc(2026, 3, 1, 1),
    )  # fmt: skip
    await rig.store.create_jobs([(job, [])])


async def test_a_month_run_by_the_scheduler_shows_only_ran(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    await _daily_job(rig)
    for day in range(31):
        rig.clock.now = utc(2026, 3, 1, 1, 0, 1) + timedelta(days=day)
        await rig.scheduler.tick(rig.clock.now)
        await rig.work()
    ticks = await rig.services.ledger.ledger("daily", MONTH_START, utc(2026, 3, 31, 23))
    assert len(ticks) == 31 and {t.status for t in ticks} == {TickStatus.RAN}
    assert await rig.services.ledger.missed_ticks(MONTH_START, rig.clock.now) == []


async def test_outages_show_as_skipped_or_missed(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    await _daily_job(rig)
    rig.clock.now = utc(2026, 3, 5, 1, 0, 1)  # down from the 1st: no catch-up
    await rig.scheduler.tick(rig.clock.now)
    ticks = await rig.services.ledger.ledger("daily", MONTH_START, utc(2026, 3, 7))
    assert Counter(t.status for t in ticks) == {
        TickStatus.SKIPPED: 4, TickStatus.DUE: 1, TickStatus.UPCOMING: 1
    }  # fmt: skip

    await _daily_job(rig, "ignored")  # a job no scheduler acted on: its ticks are missed
    rig.clock.now = utc(2026, 3, 7)
    found = await rig.services.ledger.missed_ticks(MONTH_START, job="ignored")
    assert [m.logical_date.day for m in found] == [1, 2, 3, 4, 5, 6]
    everyone = await rig.services.ledger.missed_ticks(MONTH_START)
    daily = [m.logical_date.day for m in everyone if m.job_name == "daily"]
    assert daily == [5, 6]  # the 5th's run never started (late), the 6th has none


async def test_a_tick_is_missed_past_the_jobs_own_start_deadline(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    job = make_job(
        "patient", now=MONTH_START, schedule=DAILY, task=shell_task("true"),
        next_fire_at=utc(2026, 3, 1, 1),
    )  # fmt: skip
    await rig.store.create_jobs([(replace(job, start_deadline=7200.0), [])])
    await _daily_job(rig, "eager")  # the default deadline: 5 min
    rig.clock.now = utc(2026, 3, 1, 2, 30)  # 90 min after the 01:00 tick; nothing ran
    missed = await rig.services.ledger.missed_ticks(MONTH_START)
    assert [m.job_name for m in missed] == ["eager"]
    rig.clock.now = utc(2026, 3, 1, 3, 0, 1)  # past the patient job's 2 h too
    missed = await rig.services.ledger.missed_ticks(MONTH_START)
    assert sorted(m.job_name for m in missed) == ["eager", "patient"]
