"""Storage-side fencing for leases held outside the database (etcd, ZooKeeper).

The database cannot see such a lease, so it cannot tell whether a token still holds it. It
can still refuse every write of an older leader once a newer one has written: a fence row
per lease name keeps the highest token any write has carried. Each fenced write, first thing
in its own transaction, raises the row to its token if that is higher and is refused if its
token is lower. The row stays locked until the transaction ends (the upsert takes a row
lock on PostgreSQL; SQLite writes hold the database lock), so a new leader's first write
waits for an old leader's write in flight, and every old write after it is refused.

The leader's own fenced writes queue on that row lock one after the other; they are short
(one batch each) and only the leader makes them.
"""

from __future__ import annotations

from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.ports import Fence, Fenced
from tickwork.store import leases
from tickwork.store.dialect import Dialect, upsert
from tickwork.store.schema import fences

T = TypeVar("T")


def hold(conn: Connection, dialect: Dialect, fence: Fence) -> None:
    """Raise ``Fenced`` unless ``fence`` may write, and keep that true until the transaction
    ends: the lease row's check for a database lease, the fence row's for an external one."""
    if not fence.external:
        leases.hold_fence(conn, dialect, fence)
    elif highest_seen(conn, dialect, fence) != fence.token:
        raise Fenced(fence)


def highest_seen(conn: Connection, dialect: Dialect, fence: Fence) -> int | None:
    """Raise the fence row of ``fence.lease`` to ``fence.token`` if that is higher, and
    return its token (None if it was higher than ``fence.token``: refused)."""
    # An equal token updates the row too: that is what locks it for the transaction.
    statement = upsert(
        dialect,
        fences,
        {"name": fence.lease, "token": fence.token},
        index_elements=["name"],
        set_={"token": fence.token},
        where=fences.c.token <= fence.token,
    )
    token: int | None = conn.scalar(statement.returning(fences.c.token))
    return token


def get(conn: Connection, name: str) -> int | None:
    """The highest token seen for ``name``; None if no external fence was ever checked."""
    token: int | None = conn.scalar(sa.select(fences.c.token).where(fences.c.name == name))
    return token
