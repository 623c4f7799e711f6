"""API tokens and idempotency keys: their records and the store ports that keep them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol


class Scope(StrEnum):
    """What an API token may do. Each scope includes the ones before it."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    def allows(self, needed: Scope) -> bool:
        order = list(Scope)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A bearer token as stored: only the SHA-256 of its secret, never the secret."""

    id: str
    name: str
    scope: Scope
    secret_hash: str
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """A remembered ``Idempotency-Key``: the hash of its request and the response stored.

    ``status`` and ``body`` are None only in a row that an older tickwork claimed before its
    write ran (it claimed keys in a transaction of their own); such a row stays until it
    expires.
    """

    request_hash: str
    status: int | None
    body: str | None


@dataclass(frozen=True, slots=True)
class KeyReceipt:
    """An ``Idempotency-Key`` and the response of the write it guards, recorded by that
    write's own transaction: the key is kept if and only if the write commits."""

    token_id: str
    key: str
    request_hash: str
    status: int
    body: str
    created_at: datetime
    expires_at: datetime


class KeyTaken(Exception):
    """A write carried a ``KeyReceipt`` whose key a live record holds: nothing was written.

    ``held`` is that record, to replay (same request) or to refuse (another request).
    """

    def __init__(self, held: IdempotencyRecord) -> None:
        super().__init__("the idempotency key is recorded already")
        self.held = held


class TokenStore(Protocol):
    """API tokens. Names are unique among tokens that are not revoked."""

    async def create_token(self, token: ApiToken) -> None:
        """Insert a token; ``Conflict("name", ...)`` if a live token has its name."""

    async def get_token(self, token_id: str) -> ApiToken | None:
        """The token with this id, revoked or not."""

    async def list_tokens(self) -> list[ApiToken]:
        """Every token, revoked ones included, oldest first."""

    async def revoke_token(self, id_or_name: str, now: datetime) -> ApiToken | None:
        """Revoke the live token with this id or name; None if there is none."""

    async def touch_token(self, token_id: str, now: datetime) -> None:
        """Record that the token was used at ``now``."""


class IdempotencyStore(Protocol):
    """``Idempotency-Key`` records, per token. The (token, key) pair is the lock.

    Keys are written only by the writes they guard (``Store.create_jobs`` and
    ``Store.create_runs`` take a ``KeyReceipt``), in the same transaction; here they are read
    and purged.
    """

    async def get_key(self, token_id: str, key: str, now: datetime) -> IdempotencyRecord | None:
        """The record of this key if it has not expired at ``now``."""

    async def purge_keys(self, now: datetime) -> int:
        """Delete keys that expired at or before ``now``; returns how many."""
