"""The core stays pure: no I/O, event loop, processes, SQL, randomness or clock reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tickwork.core

FORBIDDEN_MODULES = frozenset(
    {"asyncio", "socket", "subprocess", "sqlalchemy", "os", "time", "random", "httpx2"}
)
CLOCK_READS = frozenset({"now", "utcnow", "today"})
CORE = Path(tickwork.core.__file__).parent
MODULES = sorted(CORE.rglob("*.py"))


def impurities(source: str) -> list[str]:
    """What in ``source`` breaks the core's purity, as readable findings."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            names = []
        found += [f"imports {n}" for n in names if n.split(".")[0] in FORBIDDEN_MODULES]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CLOCK_READS
        ):
            found.append(f"reads the clock with .{node.func.attr}() on line {node.lineno}")
    return found


def test_core_has_modules_to_check() -> None:
    assert {p.name for p in MODULES} >= {"cron.py", "schedule.py", "model.py", "states.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_core_module_is_pure(path: Path) -> None:
    assert impurities(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    ("source", "finding"),
    [
        ("import asyncio", "imports asyncio"),
        ("import os.path", "imports os.path"),
        ("from time import monotonic", "imports time"),
        ("from sqlalchemy.sql import select", "imports sqlalchemy.sql"),
        ("import random as r", "imports random"),
        ("import subprocess, json", "imports subprocess"),
        ("from datetime import datetime\nx = datetime.now()", "reads the clock with .now()"),
        ("import datetime\nx = datetime.datetime.utcnow()", "reads the clock with .utcnow()"),
        ("from datetime import date\nx = date.today()", "reads the clock with .today()"),
    ],
)
def test_purity_check_catches_each_kind_of_impurity(source: str, finding: str) -> None:
    assert any(f.startswith(finding) for f in impurities(source))


def test_purity_check_allows_what_the_core_needs() -> None:
    source = "from datetime import datetime, timedelta\nfrom zoneinfo import ZoneInfo\nimport re"
    assert impurities(source) == []
