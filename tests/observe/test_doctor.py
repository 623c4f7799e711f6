"""``tickwork doctor``: each check says ok, warn or fail from what it read, with the fix."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import psycopg

from tests.pg import libpq_url
from tickwork.app.settings import Settings
from tickwork.ports import WorkerInfo
from tickwork.serve.doctor import (
    diagnose,
    postgres_findings,
    skew_finding,
    token_findings,
)
from tickwork.store import open_store


def processes(schedulers: int, workers: int) -> list[WorkerInfo]:
    t = datetime.now(UTC)
    kinds = ["scheduler"] * schedulers + ["worker"] * workers
    return [WorkerInfo(f"p{i}", "h", i, (), 8, t, t, kind=k) for i, k in enumerate(kinds)]


def levels(
    facts: dict[str, str], schedulers: int = 2, workers: int = 3, apis: int = 1
) -> dict[str, str]:
    return {
        f.check: f.level for f in postgres_findings(facts, processes(schedulers, workers), apis)
    }


GOOD = {
    "max_wal_size": "8192",
    "max_wal_size.unit": "MB",
    "autovacuum": "on",
    "autovacuum_vacuum_scale_factor": "0.2",  # the server's default
    "vacuum_scale_factor:task_runs_p202612": "0.02",
    "vacuum_scale_factor:runs_p202612": "0.02",
    "max_connections": "200",
}


def test_postgres_settings_far_off_are_warned_with_the_fix() -> None:
    assert levels(GOOD) == {"max_wal_size": "ok", "autovacuum": "ok", "max_connections": "ok"}
    assert levels(GOOD | {"max_wal_size": "1024"})["max_wal_size"] == "warn"  # the default
    assert levels(GOOD | {"max_wal_size": "4", "max_wal_size.unit": "GB"})["max_wal_size"] == "ok"
    assert levels(GOOD | {"autovacuum": "off"})["autovacuum"] == "warn"
    # 10 x (2 + 1) + 14 x (3 + 1) = 86 connections: 60 is too few, 100 enough
    assert levels(GOOD | {"max_connections": "60"})["max_connections"] == "warn"
    assert levels(GOOD | {"max_connections": "100"})["max_connections"] == "ok"
    assert (
        levels(GOOD | {"max_connections": "100"}, workers=10, apis=2)["max_connections"] == "warn"
    )
    (wal,) = [
        f
        for f in postgres_findings(GOOD | {"max_wal_size": "1024"}, [], 1)
        if f.check == "max_wal_size"
    ]
    assert wal.message.startswith("1024 MB")
    assert "max_wal_size = '8GB'" in wal.fix and "checkpoint_timeout = '15min'" in wal.fix


def test_hot_partitions_vacuumed_late_are_warned_by_name() -> None:
    untuned = GOOD | {"vacuum_scale_factor:runs_p202612": ""}  # the server's 20 % applies
    (found,) = [f for f in postgres_findings(untuned, [], 1) if f.check == "autovacuum"]
    assert found.level == "warn" and "runs_p202612 at 20%" in found.message
    assert "task_runs_p202612" not in found.message  # its own 2 % is fine
    assert "ALTER TABLE runs_p202612 SET (autovacuum_vacuum_scale_factor = 0.02)" in found.fix
    assert levels(untuned | {"autovacuum_vacuum_scale_factor": "0.02"})["autovacuum"] == "ok"
    assert levels(GOOD | {"vacuum_scale_factor:runs_p202612": "0.1"})["autovacuum"] == "warn"


def test_clock_skew_over_a_second_is_warned() -> None:
    assert skew_finding(0.3, 0.01).level == "ok"
    late = skew_finding(-2.5, 0.01)
    assert late.level == "warn" and "+2.5 s" in late.message and "NTP" in late.fix


def test_a_token_file_others_can_read_is_warned(tmp_path: Path) -> None:
    token = tmp_path / "admin.token"
    assert token_findings(token)[0].level == "ok"  # none: nothing to protect
    token.write_text("tw_x")
    token.chmod(0o644)
    (found,) = token_findings(token)
    assert found.level == "warn" and found.fix == f"chmod 600 {token}"
    token.chmod(0o600)
    assert token_findings(token)[0].level == "ok"


async def test_doctor_on_an_unmigrated_database_says_to_upgrade(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    found = {f.check: f for f in await diagnose(settings)}
    assert found["database"].level == "ok"
    assert (found["schema"].level, found["schema"].fix) == ("fail", "tickwork db upgrade")


async def test_doctor_on_a_migrated_postgres_checks_clock_settings_and_broker(
    pg_url: str, redis_url: str, tmp_path: Path
) -> None:
    settings = Settings(database_url=pg_url, redis_url=redis_url, data_dir=tmp_path)
    found = {f.check: f for f in await diagnose(settings, apis=1)}
    assert found["schema"].level == "ok"
    assert found["clock"].level == "ok"
    assert {"max_wal_size", "autovacuum", "max_connections"} <= set(found)
    assert found["broker"].level == "ok"
    assert found["autovacuum"].level in ("ok", "warn")
    bad = Settings(database_url=pg_url, redis_url="redis://127.0.0.1:1/0", data_dir=tmp_path)
    broken = {f.check: f for f in await diagnose(bad)}
    assert broken["broker"].level == "fail"


async def test_server_facts_hold_this_months_hot_partitions_vacuum_scale(pg_url: str) -> None:
    partition = f"task_runs_p{datetime.now(UTC):%Y%m}"
    key = f"vacuum_scale_factor:{partition}"
    store = await open_store(pg_url)
    try:
        facts = await store.server_facts()
        assert facts[key] == "" and f"vacuum_scale_factor:runs_p{partition[-6:]}" in facts
        with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {partition} SET (autovacuum_vacuum_scale_factor = 0.02)")
            try:
                assert (await store.server_facts())[key] == "0.02"
            finally:
                conn.execute(f"ALTER TABLE {partition} RESET (autovacuum_vacuum_scale_factor)")
    finally:
        await store.close()
