"""``tickwork token create | list | revoke`` through the in-process server."""

from __future__ import annotations

import json

from tests.cli.conftest import Cli, error_line


def test_create_list_revoke(cli: Cli) -> None:
    created = cli.ok("token", "create", "--name", "ci", "--scope", "write")
    secret = created.stdout.strip()
    assert secret.startswith("tw_")
    assert "not shown again" in created.stderr
    listed = json.loads(cli.ok("token", "list", "-o", "json").stdout)
    assert sorted(t["name"] for t in listed) == ["ci", "cli-admin"]
    assert secret not in cli.ok("token", "list").stdout
    assert "revoked token" in cli.ok("token", "revoke", "ci").stdout
    assert "no token 'ci'" in error_line(cli("token", "revoke", "ci"))


def test_a_write_token_may_not_add_shell_jobs(cli: Cli) -> None:
    secret = cli.ok("token", "create", "--name", "w", "--scope", "write").stdout.strip()
    line = error_line(cli("--token", secret, "job", "add", "x", "--now", "--", "true"))
    assert "admin" in line
