"""API tokens: only the hash of a secret is stored; names are unique among live tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError

from tickwork.core.errors import Conflict
from tickwork.ports import ApiToken, Scope
from tickwork.store.schema import api_tokens


def create_token(conn: Connection, token: ApiToken) -> None:
    try:
        conn.execute(api_tokens.insert().values(**_to_row(token)))
    except IntegrityError:
        raise Conflict("name", f"a live token is already called {token.name!r}") from None


def get_token(conn: Connection, token_id: str) -> ApiToken | None:
    row = conn.execute(sa.select(api_tokens).where(api_tokens.c.id == token_id)).mappings().first()
    return _from_row(row) if row is not None else None


def list_tokens(conn: Connection) -> list[ApiToken]:
    query = sa.select(api_tokens).order_by(api_tokens.c.created_at, api_tokens.c.id)
    return [_from_row(row) for row in conn.execute(query).mappings()]


def revoke_token(conn: Connection, id_or_name: str, now: datetime) -> ApiToken | None:
    live = api_tokens.c.revoked_at.is_(None)
    match = sa.or_(api_tokens.c.id == id_or_name, api_tokens.c.name == id_or_name)
    query = sa.select(api_tokens).where(live, match).order_by(api_tokens.c.id == id_or_name)
    row = conn.execute(query).mappings().first()
    if row is None:
        return None
    update = api_tokens.update().where(api_tokens.c.id == row["id"], live)
    if conn.execute(update.values(revoked_at=now)).rowcount != 1:
        return None  # revoked meanwhile
    return _from_row({**row, "revoked_at": now})


def touch_token(conn: Connection, token_id: str, now: datetime) -> None:
    conn.execute(api_tokens.update().where(api_tokens.c.id == token_id).values(last_used_at=now))


def _to_row(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "scope": token.scope.value,
        "secret_hash": token.secret_hash,
        "created_at": token.created_at,
        "last_used_at": token.last_used_at,
        "revoked_at": token.revoked_at,
    }


def _from_row(row: RowMapping | dict[str, Any]) -> ApiToken:
    return ApiToken(
        id=row["id"],
        name=row["name"],
        scope=Scope(row["scope"]),
        secret_hash=row["secret_hash"],
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
    )
