"""``tickwork pool set | list | delete`` through the CLI runner against the in-process API."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import Cli, error_line


def test_pool_set_creates_resizes_and_lists(cli: Cli) -> None:
    result = cli.ok("pool", "set", "db", "--slots", "4", "--description", "the warehouse")
    assert result.stdout.strip() == "pool db: 4 slots (0 in use)"
    cli.ok("pool", "set", "gpu", "--slots", "1")
    assert cli.ok("pool", "set", "db", "--slots", "2").stdout.strip() == (
        "pool db: 2 slots (0 in use)"
    )
    listed = json.loads(cli.ok("pool", "list", "-o", "json").stdout)
    assert listed == [
        {"name": "db", "slots": 2, "used": 0, "description": "the warehouse"},  # kept
        {"name": "gpu", "slots": 1, "used": 0, "description": ""},
    ]
    table = [_cells(line) for line in cli.ok("pool", "list").stdout.splitlines()]
    assert [row for row in table if row] == [
        ["name", "slots", "used", "description"],
        ["db", "2", "0", "the", "warehouse"],
        ["gpu", "1", "0", "-"],
    ]
    cli.ok("pool", "set", "db", "--slots", "2", "--description", "")
    assert json.loads(cli.ok("pool", "list", "-o", "json").stdout)[0]["description"] == ""


def _cells(line: str) -> list[str]:
    return [word for word in line.split() if word.strip("━┃│┡┩╇─┼")]


def test_pool_delete_removes_it_and_a_second_delete_fails(cli: Cli) -> None:
    cli.ok("pool", "set", "db", "--slots", "1")
    assert cli.ok("pool", "delete", "db").stdout.strip() == "deleted pool db"
    assert cli.ok("pool", "list").stdout.strip() == "no pools"
    assert error_line(cli("pool", "delete", "db")) == "error: no pool 'db'"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("pool", "set", "db", "--slots", "0"), "error: slots: must be a whole number from 1"),
        (("pool", "set", "a b", "--slots", "1"), "error: name: 'a b' is not a valid name"),
    ],
)
def test_a_bad_pool_is_one_error_line_and_nothing_is_written(
    cli: Cli, args: tuple[str, ...], says: str
) -> None:
    assert error_line(cli(*args)).startswith(says)
    assert cli.ok("pool", "list").stdout.strip() == "no pools"
