"""Retention prunes ``run_alerts`` with the run history: the alerts fired before the cutoff go,
the others stay, and no retention keeps them all (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.core.alerts import Alert, AlertKind, WatchedRun
from tickwork.core.model import RunState
from tickwork.ids import new_id
from tickwork.store import SqlStore

# PostgreSQL's test database is the session's: now, and a retention of ten years, create
# only the months the migration made and drop none that other tests make (2020 on).
NOW = datetime.now(UTC)
DAY = timedelta(days=1)
KEEP = 3650


async def fired(store: SqlStore, kind: AlertKind, at: datetime) -> str:
    run = WatchedRun(new_id(), "pruned", at - DAY, RunState.QUEUED)
    alert = Alert(kind, run, limit=timedelta(minutes=5), late_by=timedelta(minutes=1))
    assert await store.record_alerts([alert], at) == [alert]
    return run.run_id


async def test_retention_deletes_the_alerts_fired_before_its_cutoff(store: SqlStore) -> None:
    old = {await fired(store, kind, NOW - (KEEP + 10) * DAY) for kind in AlertKind}
    edge = await fired(store, AlertKind.MISSED, NOW - KEEP * DAY)  # on the cutoff: kept
    recent = await fired(store, AlertKind.SLA_MISS, NOW - 5 * DAY)

    kept_all = await store.maintain_partitions(NOW)  # no retention: nothing pruned
    assert kept_all.deleted_alerts == 0
    assert (await store.recent_alerts(NOW - (KEEP + 20) * DAY, job_name="pruned")).missed == 2

    done = await store.maintain_partitions(NOW, retention_days=KEEP)
    assert done.deleted_alerts == len(AlertKind) and bool(done)
    summary = await store.recent_alerts(NOW - (KEEP + 20) * DAY, job_name="pruned")
    assert {a.run_id for a in summary.newest} == {edge, recent}
    assert old.isdisjoint(a.run_id for a in summary.newest)
    again = await store.maintain_partitions(NOW, retention_days=KEEP)
    assert again.deleted_alerts == 0
