"""Pools in request and response bodies."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tickwork.api.schemas.numbers import Whole
from tickwork.api.text import Text
from tickwork.core.validate import MAX_SLOTS
from tickwork.ports import PoolUsage


class PoolSet(BaseModel):
    """A pool's size, to create it or to resize it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    slots: Whole = Field(
        description=f"Slots tasks of this pool may hold at once, 1 to {MAX_SLOTS}.",
        examples=[4],
        # Documented here, checked by the pool service (its message names the rule).
        json_schema_extra={"minimum": 1, "maximum": MAX_SLOTS},
    )
    description: Text | None = Field(
        None, description="What the pool guards, for people; left out: kept (new pools: none)."
    )


class PoolRead(BaseModel):
    """A pool and the slots its queued and running task runs hold now."""

    name: str
    slots: int
    used: int = Field(description="Slots held now; may exceed `slots` just after a shrink.")
    description: str

    @classmethod
    def of(cls, usage: PoolUsage) -> PoolRead:
        pool = usage.pool
        return cls(name=pool.name, slots=pool.slots, used=usage.used, description=pool.description)


class PoolListRead(BaseModel):
    """Every pool, by name."""

    pools: list[PoolRead]
