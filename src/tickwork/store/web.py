"""The audit log and dashboard sign-ins (``AuditLog``, ``WebSessionStore``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from tickwork.core.errors import ValidationError
from tickwork.ports.web import AuditEntry, AuditPage, WebSession
from tickwork.store.schema import audit_log, web_sessions

T = TypeVar("T")


def record_audit(conn: Connection, entries: Sequence[AuditEntry]) -> None:
    conn.execute(audit_log.insert(), [_audit_row(e) for e in entries])


def list_audit(
    conn: Connection, limit: int, cursor: str | None, token_name: str | None
) -> AuditPage:
    query = sa.select(audit_log).order_by(audit_log.c.id.desc()).limit(limit + 1)
    if cursor is not None:
        if not cursor.isalnum() or len(cursor) > 64:
            raise ValidationError("cursor", "is not a cursor returned by a previous page")
        query = query.where(audit_log.c.id < cursor)
    if token_name is not None:
        query = query.where(audit_log.c.token_name == token_name)
    rows = conn.execute(query).mappings().all()
    entries = [_audit_entry(r) for r in rows[:limit]]
    more = len(rows) > limit and bool(entries)
    return AuditPage(entries=entries, next_cursor=entries[-1].id if more else None)


def last_audit(conn: Connection, action: str, targets: Sequence[str]) -> AuditEntry | None:
    query = (
        sa.select(audit_log)
        .where(audit_log.c.action == action, audit_log.c.target.in_(list(targets)))
        .order_by(audit_log.c.id.desc())
        .limit(1)
    )
    row = conn.execute(query).mappings().first()
    return None if row is None else _audit_entry(row)


def create_web_session(conn: Connection, session: WebSession) -> None:
    conn.execute(
        web_sessions.insert().values(
            id=session.id,
            token_id=session.token_id,
            csrf=session.csrf,
            created_at=session.created_at,
            expires_at=session.expires_at,
        )
    )


def get_web_session(conn: Connection, session_id: str, now: datetime) -> WebSession | None:
    query = sa.select(web_sessions).where(
        web_sessions.c.id == session_id, web_sessions.c.expires_at > now
    )
    row = conn.execute(query).mappings().first()
    if row is None:
        return None
    return WebSession(
        id=row["id"],
        token_id=row["token_id"],
        csrf=row["csrf"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )


def end_web_session(conn: Connection, session_id: str, now: datetime) -> None:
    # Sign-out also sweeps expired sessions: no separate housekeeping loop needed.
    conn.execute(
        sa.delete(web_sessions).where(
            sa.or_(web_sessions.c.id == session_id, web_sessions.c.expires_at <= now)
        )
    )


def _audit_row(e: AuditEntry) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": e.at,
        "token_id": e.token_id,
        "token_name": e.token_name,
        "source": e.source,
        "action": e.action,
        "target": e.target[:500],
        "detail": dict(e.detail),
        "outcome": e.outcome,
    }


def _audit_entry(r: RowMapping) -> AuditEntry:
    return AuditEntry(
        id=r["id"],
        at=r["at"],
        token_id=r["token_id"],
        token_name=r["token_name"],
        source=r["source"],
        action=r["action"],
        target=r["target"],
        detail=r["detail"] or {},
        outcome=r["outcome"],
    )
