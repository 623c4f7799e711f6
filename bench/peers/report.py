"""The Markdown table of a run (one row per contender, errors included)."""

from __future__ import annotations

import math
from typing import Any

HEADER = (
    "| contender | version | W1 jobs/s (submit/s) | W2 p50 / p95 / p99 ms "
    "| W3 late p50 / p99 / max ms | lost / dup | notes |\n"
    "|---|---|---|---|---|---|---|"
)


def _num(value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _cell(result: dict[str, Any], key: str, fields: tuple[str, ...]) -> str:
    part = result.get(key)
    if not part:
        return "n/a"
    return " / ".join(_num(part[f]) for f in fields)


def _losses(result: dict[str, Any]) -> str:
    parts = [result.get(k) or {} for k in ("w1", "w2", "w3")]
    lost = sum(int(p.get("lost", 0)) for p in parts)
    dups = sum(int(p.get("duplicates", 0)) for p in parts)
    return f"{lost} / {dups}"


def row(result: dict[str, Any]) -> str:
    info = result.get("info") or {}
    w1 = result.get("w1")
    w1_cell = f"{_num(w1['jobs_per_s'])} ({_num(w1['submit_jobs_per_s'])})" if w1 else "n/a"
    notes = info.get("notes", "")
    late = ((result.get("w3") or {}).get("extra") or {}).get("submitted_after_due", 0)
    if late:
        notes += f"; **W3: {late} jobs were submitted after their due instant**"
    w2 = (result.get("w2") or {}).get("extra") or {}
    if w2.get("offered_per_s") and w2["offered_per_s"] < 0.95 * w2["rate"]:
        notes += f"; **W2: the submits only managed {w2['offered_per_s']:,.0f} jobs/s**"
    if "error" in result:
        notes = f"**failed: {result['error']}** {notes}"
    cells = [
        result["name"],
        info.get("version", "?"),
        w1_cell,
        _cell(result, "w2", ("p50_ms", "p95_ms", "p99_ms")),
        _cell(result, "w3", ("p50_ms", "p99_ms", "max_ms")),
        _losses(result),
        notes,
    ]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def table(results: list[dict[str, Any]]) -> str:
    return "\n".join([HEADER, *(row(r) for r in results)])


def configs(results: list[dict[str, Any]]) -> str:
    """How each contender ran: the exact worker command(s) and why those settings."""
    lines = ["| contender | worker processes as started | W1 submit |", "|---|---|---|"]
    for r in results:
        info, w1 = r.get("info") or {}, r.get("w1") or {}
        cells = [r["name"], info.get("config", "?"), w1.get("bulk", "n/a")]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def costs(results: list[dict[str, Any]]) -> str:
    """W2's cost per job (CPU and wake-ups of every process kind, Redis included) and what
    the same processes cost idle per second before it (bench/peers/cost.py)."""
    lines = [
        "| contender | W2 offered jobs/s | W2 CPU µs/job (total; by role) | W2 wake-ups/job "
        "| idle CPU ms/s | idle wake-ups/s |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        extra = (r.get("w2") or {}).get("extra") or {}
        cost, idle = extra.get("cost"), extra.get("idle_per_s")
        if not cost or not idle:
            continue
        cpu = cost["cpu_us"]
        roles = ", ".join(f"{k} {_num(v)}" for k, v in cpu.items() if k != "total")
        cells = [
            r["name"],
            _num(extra.get("offered_per_s")),
            f"**{_num(cpu['total'])}**; {roles}",
            _num(cost["wakeups"]["total"]),
            _num(idle["cpu_us"]["total"] / 1000),
            _num(idle["wakeups"]["total"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
