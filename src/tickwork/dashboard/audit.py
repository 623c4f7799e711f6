"""Writing the dashboard's actions to the audit log."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tickwork.dashboard.context import Ctx
from tickwork.ids import new_id
from tickwork.ports.web import AuditEntry

log = logging.getLogger("tickwork.dashboard")


async def record(
    ctx: Ctx,
    action: str,
    target: str,
    detail: Mapping[str, Any] | None = None,
    outcome: str = "ok",
) -> None:
    """Append one entry for the visitor's token; a failed write is logged, not raised: the
    action itself has happened (or been refused) already."""
    entry = AuditEntry(
        id=new_id(),
        at=ctx.now,
        token_id=ctx.visitor.token.id,
        token_name=ctx.visitor.token.name,
        source="dashboard",
        action=action,
        target=target,
        detail=dict(detail or {}),
        outcome=outcome,
    )
    try:
        await ctx.store.record_audit([entry])
    except Exception as exc:
        log.warning("audit entry not written (%s %s): %r", action, target, exc)
