"""Python tasks for the DAG engine tests. Each one that records writes to a ledger file of
its own (JSON lines), so the test reads what really ran, not what tickwork says ran."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def _record(ledger: str, **fields: Any) -> None:
    with Path(ledger).open("a") as out:
        out.write(json.dumps(fields) + "\n")


def extract_users() -> list[dict[str, Any]]:
    return [{"id": 1, "name": "ada"}, {"id": 2, "name": "grace"}]


def extract_orders() -> list[dict[str, Any]]:
    return [{"user": 1, "total": 30}, {"user": 2, "total": 12}, {"user": 1, "total": 5}]


def join(users: list[dict[str, Any]], orders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = {u["id"]: u["name"] for u in users}
    return [{"name": names[o["user"]], "total": o["total"]} for o in orders]


def aggregate(rows: list[dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for row in rows:
        totals[row["name"]] = totals.get(row["name"], 0) + row["total"]
    return totals


def load(totals: dict[str, int], ledger: str) -> None:
    _record(ledger, task="load", totals=totals)


def ok() -> str:
    return "ok"


def boom() -> None:
    raise RuntimeError("boom")


def mark(ledger: str, label: str) -> None:
    _record(ledger, task=label)


def hold(ledger: str, label: str, seconds: float) -> None:
    """Work that takes a while, with its start and end in the ledger (pools, run limits)."""
    start = time.time()
    time.sleep(seconds)
    _record(ledger, task=label, start=start, end=time.time())


def choose(names: list[str]) -> dict[str, list[str]]:
    return {"$branch": names}


def big(size: int) -> str:
    return "x" * size


def flaky(ledger: str, marker: str) -> None:
    """Fails while the marker file exists (the test removes it to let the task succeed)."""
    _record(ledger, task="flaky", marker_exists=Path(marker).exists())
    if Path(marker).exists():
        raise RuntimeError("not yet")


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
