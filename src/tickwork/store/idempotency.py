"""``Idempotency-Key`` records. The primary key (token, key) is the lock between requests.

A key is recorded by the transaction of the write it guards (``record_key``, called first in
that transaction), together with the write's response. So a key is never kept for a write
that did not commit, and a committed write always has its key and response.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.ports import IdempotencyRecord, KeyReceipt, KeyTaken
from tickwork.store.dialect import Dialect, insert_ignoring
from tickwork.store.schema import idempotency_keys as keys

T = TypeVar("T")


def keyed(
    dialect: Dialect, receipt: KeyReceipt | None, work: Callable[[Connection], T]
) -> Callable[[Connection], T]:
    """``work`` preceded, in its transaction, by recording ``receipt`` (if there is one)."""
    if receipt is None:
        return work

    def record_then_work(conn: Connection) -> T:
        record_key(conn, dialect, receipt)
        return work(conn)

    return record_then_work


def record_key(conn: Connection, dialect: Dialect, receipt: KeyReceipt) -> None:
    """Insert the key with its response, or raise ``KeyTaken`` if a live record holds it.

    Raising rolls the caller's transaction back, so the write it guards never happens. On
    PostgreSQL a concurrent insert of the same key waits on the primary key until the first
    transaction ends, then sees its row (or inserts, if that one rolled back); SQLite runs
    one write transaction at a time. Either way, of two writes with one key one commits.
    """
    expired = sa.and_(_this(receipt.token_id, receipt.key), keys.c.expires_at <= receipt.created_at)
    conn.execute(keys.delete().where(expired))
    row = {
        "token_id": receipt.token_id,
        "key": receipt.key,
        "request_hash": receipt.request_hash,
        "status": receipt.status,
        "response": receipt.body,
        "created_at": receipt.created_at,
        "expires_at": receipt.expires_at,
    }
    stmt = insert_ignoring(dialect, keys, ["token_id", "key"]).values(**row)
    if conn.execute(stmt.returning(keys.c.key)).first() is None:
        query = sa.select(keys.c.request_hash, keys.c.status, keys.c.response)
        held = conn.execute(query.where(_this(receipt.token_id, receipt.key))).one()
        raise KeyTaken(IdempotencyRecord(request_hash=held[0], status=held[1], body=held[2]))


def get_key(conn: Connection, token_id: str, key: str, now: datetime) -> IdempotencyRecord | None:
    query = sa.select(keys.c.request_hash, keys.c.status, keys.c.response).where(
        _this(token_id, key), keys.c.expires_at > now
    )
    found = conn.execute(query).first()
    if found is None:
        return None
    return IdempotencyRecord(request_hash=found[0], status=found[1], body=found[2])


def purge_keys(conn: Connection, now: datetime) -> int:
    return conn.execute(keys.delete().where(keys.c.expires_at <= now)).rowcount


def _this(token_id: str, key: str) -> sa.ColumnElement[bool]:
    return sa.and_(keys.c.token_id == token_id, keys.c.key == key)
