"""Secret bodies: a value goes in; only names and times come out."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tickwork.app.secrets import MAX_SECRET


class SecretIn(BaseModel):
    """A secret's value; it is encrypted at once and never shown again."""

    model_config = ConfigDict(extra="forbid", strict=True)

    value: str = Field(min_length=1, max_length=MAX_SECRET)


class SecretRead(BaseModel):
    """A secret as listed: never its value."""

    model_config = ConfigDict(from_attributes=True)

    name: str
    created_at: datetime
    updated_at: datetime


class SecretListRead(BaseModel):
    secrets: list[SecretRead]
