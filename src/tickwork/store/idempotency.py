"""``Idempotency-Key`` records. The primary key (token, key) is the lock between requests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.ports import IdempotencyRecord
from tickwork.store.common import insert_ignoring_duplicates
from tickwork.store.schema import idempotency_keys as keys

T = TypeVar("T")


class SqlIdempotencyMethods:
    """The ``IdempotencyStore`` port of ``SqlStore``: each method is one transaction."""

    if TYPE_CHECKING:

        async def _write(self, work: Callable[[Connection], T]) -> T: ...

    async def claim_key(
        self, token_id: str, key: str, request_hash: str, now: datetime, expires_at: datetime
    ) -> IdempotencyRecord | None:
        return await self._write(
            lambda conn: claim_key(
                conn, token_id, key=key, request_hash=request_hash, now=now, expires_at=expires_at
            )
        )

    async def finish_key(self, token_id: str, key: str, status: int, body: str) -> None:
        await self._write(lambda conn: finish_key(conn, token_id, key, status, body))

    async def release_key(self, token_id: str, key: str) -> None:
        await self._write(lambda conn: release_key(conn, token_id, key))

    async def purge_keys(self, now: datetime) -> int:
        return await self._write(lambda conn: purge_keys(conn, now))


def _this(token_id: str, key: str) -> sa.ColumnElement[bool]:
    return sa.and_(keys.c.token_id == token_id, keys.c.key == key)


def claim_key(
    conn: Connection,
    token_id: str,
    *,
    key: str,
    request_hash: str,
    now: datetime,
    expires_at: datetime,
) -> IdempotencyRecord | None:
    # An expired key is free again. On PostgreSQL a concurrent claim waits on the row lock
    # of this delete or on the unique index, then sees the winner's row: never two winners.
    conn.execute(keys.delete().where(_this(token_id, key), keys.c.expires_at <= now))
    row = {
        "token_id": token_id,
        "key": key,
        "request_hash": request_hash,
        "created_at": now,
        "expires_at": expires_at,
    }
    stmt = insert_ignoring_duplicates(conn, keys, ["token_id", "key"]).values(**row)
    if conn.execute(stmt.returning(keys.c.key)).first() is not None:
        return None
    query = sa.select(keys.c.request_hash, keys.c.status, keys.c.response)
    held = conn.execute(query.where(_this(token_id, key))).one()
    return IdempotencyRecord(request_hash=held[0], status=held[1], body=held[2])


def finish_key(conn: Connection, token_id: str, key: str, status: int, body: str) -> None:
    conn.execute(keys.update().where(_this(token_id, key)).values(status=status, response=body))


def release_key(conn: Connection, token_id: str, key: str) -> None:
    conn.execute(keys.delete().where(_this(token_id, key), keys.c.status.is_(None)))


def purge_keys(conn: Connection, now: datetime) -> int:
    return conn.execute(keys.delete().where(keys.c.expires_at <= now)).rowcount
