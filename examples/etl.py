"""The ETL example in Python: extract_users + extract_orders -> join -> aggregate -> load.

    tickwork pool set db --slots 2          # the extracts share the database's two slots
    tickwork job apply examples.etl:etl     # run from the repository root

Workers import this module (``examples.etl``) to run the tasks, so start them from the
repository root too (``PYTHONPATH=. tickwork up``). ``examples/etl.yaml`` is the same workflow
as a definition file; both give the same job. Each task returns a small JSON result, which
the next one receives through ``{"$result": ...}``.
"""

from __future__ import annotations

from typing import Any

import tickwork

Rows = list[dict[str, Any]]


@tickwork.task(pool="db")
def extract_users() -> Rows:
    return [
        {"id": 1, "name": "ada", "country": "UK"},
        {"id": 2, "name": "grace", "country": "US"},
        {"id": 3, "name": "linus", "country": "FI"},
    ]


@tickwork.task(pool="db", retries=2)
def extract_orders(since: str = "1d") -> Rows:
    print(f"orders of the last {since}")
    return [
        {"user": 1, "total": 30.0},
        {"user": 2, "total": 12.5},
        {"user": 1, "total": 8.0},
        {"user": 3, "total": 5.0},
    ]


@tickwork.task
def join(users: Rows, orders: Rows) -> Rows:
    country = {user["id"]: user["country"] for user in users}
    return [{**order, "country": country[order["user"]]} for order in orders]


@tickwork.task
def aggregate(rows: Rows) -> dict[str, float]:
    totals: dict[str, float] = {}
    for row in rows:
        totals[row["country"]] = totals.get(row["country"], 0.0) + row["total"]
    return dict(sorted(totals.items()))


@tickwork.task(timeout=60)
def load(totals: dict[str, float]) -> dict[str, int]:
    print(f"loading {len(totals)} countries: {totals}")
    return {"loaded": len(totals)}


@tickwork.workflow(
    schedule={"kind": "cron", "cron": "0 2 * * *", "timezone": "Europe/Berlin"},
    max_active_runs=1,
)
def etl() -> None:
    users, orders = extract_users(), extract_orders(since="1d")
    load(aggregate(join(users, orders)))
