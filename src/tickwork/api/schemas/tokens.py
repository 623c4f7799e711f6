"""Token bodies: what an admin sends to create one, and what the API shows of them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

from tickwork.app.tokens import TOKEN_NAME_PATTERN
from tickwork.ports import Scope


class TokenCreate(BaseModel):
    """A new bearer token. Scopes nest: `admin` includes `write`, which includes `read`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(
        description="Unique among live tokens: 1-100 letters, digits, '.', '_' or '-'.",
        examples=["ci"],
        # Documented here, checked by the token service (its message names the rule).
        json_schema_extra={"pattern": TOKEN_NAME_PATTERN},
    )
    scope: Annotated[Scope, Strict(False)] = Field(description="`read`, `write` or `admin`.")


class TokenRead(BaseModel):
    """A token as listed: never its secret."""

    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="Public id; the token reads `tw_<id>_<secret>`.")
    name: str
    scope: Scope
    created_at: datetime
    last_used_at: datetime | None = Field(description="Updated at most once a minute.")
    revoked_at: datetime | None


class TokenCreated(TokenRead):
    """A token just created. `secret` is shown this once; only its hash is stored."""

    secret: str


class TokenListRead(BaseModel):
    tokens: list[TokenRead]
