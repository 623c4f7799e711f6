"""Leases with fencing tokens, and the fence check that every fenced write starts with.

Expiry is judged on PostgreSQL's own clock (``clock_timestamp()``: the instant the statement
runs, not the start of its transaction), so the clocks of the competing schedulers do not
matter. SQLite lives on one machine and judges by the store's clock (``local_now``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, RowMapping

from tickwork.ports import Fence, Fenced, Lease
from tickwork.store.schema import UTCDateTime, leases


def acquire(
    conn: Connection, name: str, holder: str, ttl: float, *, local_now: datetime
) -> Lease | None:
    now, later = _now(conn, local_now), _later(conn, local_now, ttl)
    insert = _insert(conn).values(
        name=name, holder=holder, token=1, acquired_at=now, renewed_at=now, expires_at=later
    )
    # One statement, so two holders racing are serialized on the row (the primary key):
    # the second one sees the first one's fresh lease and takes nothing.
    still_mine = sa.and_(leases.c.holder == holder, leases.c.expires_at > now)
    upsert = insert.on_conflict_do_update(
        index_elements=["name"],
        set_={
            "holder": holder,
            "token": sa.case((still_mine, leases.c.token), else_=leases.c.token + 1),
            "acquired_at": sa.case((still_mine, leases.c.acquired_at), else_=now),
            "renewed_at": now,
            "expires_at": later,
        },
        where=sa.or_(leases.c.expires_at <= now, leases.c.holder == holder),
    )
    row = conn.execute(upsert.returning(*leases.c)).mappings().first()
    return None if row is None else _lease(row)


def renew(
    conn: Connection, name: str, holder: str, token: int, ttl: float, *, local_now: datetime
) -> Lease | None:
    now = _now(conn, local_now)
    row = (
        conn.execute(
            sa.update(leases)
            .where(_held(conn, name, token, local_now), leases.c.holder == holder)
            .values(renewed_at=now, expires_at=_later(conn, local_now, ttl))
            .returning(*leases.c)
        )
        .mappings()
        .first()
    )
    return None if row is None else _lease(row)


def release(conn: Connection, name: str, holder: str, token: int, *, local_now: datetime) -> bool:
    result = conn.execute(
        sa.update(leases)
        .where(_held(conn, name, token, local_now), leases.c.holder == holder)
        .values(expires_at=_now(conn, local_now))
    )
    return result.rowcount > 0


def get(conn: Connection, name: str) -> Lease | None:
    row = conn.execute(sa.select(leases).where(leases.c.name == name)).mappings().first()
    return None if row is None else _lease(row)


def hold_fence(conn: Connection, fence: Fence, local_now: datetime) -> None:
    """Raise ``Fenced`` unless ``fence`` still holds its lease, and make sure it goes on
    holding it until this transaction ends (so the whole write is refused or none of it).

    PostgreSQL: the lease row is locked ``FOR SHARE``. A takeover is an UPDATE of that row,
    so it waits until this transaction has ended; and a takeover that committed first is
    seen here, because a locking read re-checks the newest version of the row, whose token
    no longer matches. (``FOR KEY SHARE`` would not do: a takeover changes no key column, so
    that weaker lock would let it through.) The leader's own renewals wait behind its
    writes as well; those are short, one batch each.

    SQLite: every write transaction begins ``IMMEDIATE``, holding the database's write lock
    from its first statement to its end, so no takeover can commit in between.
    """
    query = sa.select(leases.c.token).where(_held(conn, fence.lease, fence.token, local_now))
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(read=True)
    if conn.scalar(query) is None:
        raise Fenced(fence)


def _held(conn: Connection, name: str, token: int, local_now: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(
        leases.c.name == name,
        leases.c.token == token,
        leases.c.expires_at > _now(conn, local_now),
    )


def _now(conn: Connection, local_now: datetime) -> sa.ColumnElement[datetime]:
    if conn.dialect.name == "postgresql":
        return sa.func.clock_timestamp(type_=UTCDateTime())
    return sa.literal(local_now, UTCDateTime())


def _later(conn: Connection, local_now: datetime, ttl: float) -> sa.ColumnElement[datetime]:
    if not ttl > 0:
        raise ValueError(f"a lease ttl must be a positive number of seconds, not {ttl!r}")
    span = timedelta(seconds=ttl)
    if conn.dialect.name == "postgresql":
        return sa.func.clock_timestamp(type_=UTCDateTime()) + sa.literal(span, sa.Interval())
    return sa.literal(local_now + span, UTCDateTime())


def _insert(conn: Connection) -> postgresql.Insert | sqlite.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(leases)
    return sqlite.insert(leases)


def _lease(row: RowMapping) -> Lease:
    return Lease(
        name=row["name"],
        holder=row["holder"],
        token=row["token"],
        acquired_at=row["acquired_at"],
        renewed_at=row["renewed_at"],
        expires_at=row["expires_at"],
    )
