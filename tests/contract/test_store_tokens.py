"""Tokens in the SQL store (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from tests.helpers import utc
from tickwork.core.errors import Conflict
from tickwork.ports import ApiToken, Scope
from tickwork.store import SqlStore

NOW = utc(2026, 6, 1, 12)


def _token(token_id: str, name: str) -> ApiToken:
    return ApiToken(token_id, name, Scope.READ, "0" * 64, NOW)


async def test_live_names_are_unique_and_revoked_names_free_again(store: SqlStore) -> None:
    await store.create_token(_token("a1", "ci"))
    with pytest.raises(Conflict):
        await store.create_token(_token("a2", "ci"))
    revoked = await store.revoke_token("ci", NOW)
    assert revoked is not None and revoked.revoked_at == NOW
    assert await store.revoke_token("ci", NOW) is None
    await store.create_token(_token("a3", "ci"))
    assert [t.id for t in await store.list_tokens()] == ["a1", "a3"]
