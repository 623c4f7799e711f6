"""The one JSON shape of every error the API returns."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErrorItem(BaseModel):
    """One problem in a request (pydantic reports all of them)."""

    field: str | None = Field(default=None, description="Dotted path of the input, if any.")
    message: str


class ErrorDetail(BaseModel):
    code: str = Field(
        description="validation_error, not_found, conflict, method_not_allowed, internal_error",
        examples=["validation_error"],
    )
    message: str = Field(description="A human sentence.", examples=["not a valid cron expression"])
    field: str | None = Field(
        default=None, description="Dotted path of the input at fault, if any (else absent)."
    )
    details: list[ErrorItem] | None = None


class ErrorRead(BaseModel):
    """``{"error": {...}}``: the body of every 4xx and 5xx."""

    error: ErrorDetail
