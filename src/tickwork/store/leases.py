"""Leases with fencing tokens, and the fence check that every fenced write starts with.

Expiry is judged by the dialect's clock (``Dialect.now``): on PostgreSQL the server's own
(``clock_timestamp()``: the instant the statement runs, not the start of its transaction),
so the clocks of the competing schedulers do not matter; SQLite lives on one machine and
judges by the store's clock.
"""

from __future__ import annotations

import logging
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from tickwork.ports import Fence, Fenced, Lease
from tickwork.store.dialect import Dialect, upsert
from tickwork.store.schema import leases

log = logging.getLogger("tickwork.store.leases")


#: The share of the ttl an acquire may wait for the lease row's lock. A frozen leader can hold
#: that lock (``hold_fence``) for as long as its connection lives: a standby that waited ~10 s
#: for it got a lease whose deadline had passed by its own clock (``LeaderElection`` counts the
#: ttl from when it asked) and lost it at once. Bounded, a lease granted has at least two
#: thirds of its ttl left; a wait that would be longer takes nothing, and the next campaign
#: tries again (by then the lease has expired or the leader has gone on).
ACQUIRE_LOCK_SHARE = 1 / 3


def acquire(conn: Connection, dialect: Dialect, name: str, holder: str, ttl: float) -> Lease | None:
    later = _later(dialect, ttl)
    dialect.bound_lock_wait(conn, ttl * ACQUIRE_LOCK_SHARE)
    try:
        with conn.begin_nested():  # a lock wait that ran out leaves the transaction usable
            row = _upsert(conn, dialect, name, holder, later)
    except sa.exc.DBAPIError as exc:
        if not dialect.lock_wait_exceeded(exc):
            raise
        log.info("lease %r: its row stayed locked (a frozen leader?): not taken this time", name)
        return None
    return None if row is None else _lease(row)


def _upsert(
    conn: Connection, dialect: Dialect, name: str, holder: str, later: sa.ColumnElement[datetime]
) -> RowMapping | None:
    now = dialect.now()
    # One statement, so two holders racing are serialized on the row (the primary key):
    # the second one sees the first one's fresh lease and takes nothing.
    still_mine = sa.and_(leases.c.holder == holder, leases.c.expires_at > now)
    statement = upsert(
        dialect,
        leases,
        {
            "name": name,
            "holder": holder,
            "token": 1,
            "acquired_at": now,
            "renewed_at": now,
            "expires_at": later,
        },
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
    return conn.execute(statement.returning(*leases.c)).mappings().first()


def renew(
    conn: Connection, dialect: Dialect, name: str, holder: str, token: int, *, ttl: float
) -> Lease | None:
    row = (
        conn.execute(
            sa.update(leases)
            .where(_held(dialect, name, token), leases.c.holder == holder)
            .values(renewed_at=dialect.now(), expires_at=_later(dialect, ttl))
            .returning(*leases.c)
        )
        .mappings()
        .first()
    )
    return None if row is None else _lease(row)


def release(conn: Connection, dialect: Dialect, name: str, holder: str, token: int) -> bool:
    result = conn.execute(
        sa.update(leases)
        .where(_held(dialect, name, token), leases.c.holder == holder)
        .values(expires_at=dialect.now())
    )
    return result.rowcount > 0


def get(conn: Connection, name: str) -> Lease | None:
    row = conn.execute(sa.select(leases).where(leases.c.name == name)).mappings().first()
    return None if row is None else _lease(row)


def hold_fence(conn: Connection, dialect: Dialect, fence: Fence) -> None:
    """Raise ``Fenced`` unless ``fence`` still holds its lease, and make sure it goes on
    holding it until this transaction ends (so the whole write is refused or none of it).

    Where rows are locked (PostgreSQL), the lease row is locked ``FOR SHARE``. A takeover is
    an UPDATE of that row, so it waits until this transaction has ended; and a takeover that
    committed first is seen here, because a locking read re-checks the newest version of the
    row, whose token no longer matches. (``FOR KEY SHARE`` would not do: a takeover changes
    no key column, so that weaker lock would let it through.) The leader's own renewals wait
    behind its writes as well; those are short, one batch each.

    SQLite: every write transaction begins ``IMMEDIATE``, holding the database's write lock
    from its first statement to its end, so no takeover can commit in between.
    """
    query = sa.select(leases.c.token).where(_held(dialect, fence.lease, fence.token))
    if conn.scalar(dialect.share_lock(query)) is None:
        raise Fenced(fence)


def _held(dialect: Dialect, name: str, token: int) -> sa.ColumnElement[bool]:
    return sa.and_(
        leases.c.name == name,
        leases.c.token == token,
        leases.c.expires_at > dialect.now(),
    )


def _later(dialect: Dialect, ttl: float) -> sa.ColumnElement[datetime]:
    if not ttl > 0:
        raise ValueError(f"a lease ttl must be a positive number of seconds, not {ttl!r}")
    return dialect.lease_span(ttl)


def _lease(row: RowMapping) -> Lease:
    return Lease(
        name=row["name"],
        holder=row["holder"],
        token=row["token"],
        acquired_at=row["acquired_at"],
        renewed_at=row["renewed_at"],
        expires_at=row["expires_at"],
    )
