"""Tokens and idempotency keys in the SQL store (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

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


async def test_concurrent_claims_of_one_key_have_one_winner(store: SqlStore) -> None:
    later = NOW + timedelta(hours=1)
    claims = await asyncio.gather(*(store.claim_key("t", "k", "h", NOW, later) for _ in range(10)))
    assert claims.count(None) == 1
    await store.finish_key("t", "k", 201, "{}")
    held = await store.claim_key("t", "k", "h", NOW, later)
    assert held is not None and (held.status, held.body) == (201, "{}")


async def test_expired_keys_are_replaced_and_purged(store: SqlStore) -> None:
    await store.claim_key("t", "k", "h1", NOW, NOW + timedelta(seconds=1))
    await store.claim_key("t", "old", "h", NOW, NOW + timedelta(seconds=1))
    after = NOW + timedelta(seconds=2)
    assert await store.claim_key("t", "k", "h2", after, after + timedelta(hours=1)) is None
    assert await store.purge_keys(after) == 1
    await store.release_key("t", "k")
    assert await store.claim_key("t", "k", "h3", after, after + timedelta(hours=1)) is None
