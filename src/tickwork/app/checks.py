"""Argument checks shared by the services: bounded counts and aware datetimes."""

from __future__ import annotations

from datetime import datetime

from tickwork.core.errors import ValidationError


def check_limit(value: int, maximum: int, name: str = "limit") -> None:
    """``ValidationError`` on ``name`` unless ``1 <= value <= maximum``."""
    if not 1 <= value <= maximum:
        raise ValidationError(name, f"must be between 1 and {maximum}")


def require_aware(value: datetime | None, name: str) -> None:
    """``ValidationError`` on ``name`` when ``value`` is a naive datetime."""
    if value is not None and value.utcoffset() is None:
        raise ValidationError(name, "must include a UTC offset, e.g. 2026-12-01T10:00:00Z")
