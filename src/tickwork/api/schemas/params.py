"""A job's params contract in requests and answers (see ``tickwork.core.params``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tickwork.core.params import NO_PARAMS, ParamsContract


class ParamsIn(BaseModel):
    """What callers of trigger/enqueue may pass, and who may call them.

    ``properties`` maps each param to a small JSON Schema: ``type`` (string, integer,
    number, boolean, object, array or null), optional ``default``, ``description``, ``enum``,
    ``minimum``/``maximum``, ``minLength``/``maxLength``, ``pattern``,
    ``minItems``/``maxItems`` and ``items``. Undeclared params are refused (422). Python tasks
    get the params as extra keyword arguments (never over a stored kwarg), shell tasks as
    JSON in ``TICKWORK_PARAMS``. ``scope``: who may trigger or enqueue the job (default: the
    scope the job needs, ``admin`` when it runs code)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    properties: dict[str, dict[str, Any]] = Field(
        default_factory=dict, examples=[{"n": {"type": "integer", "default": 1, "minimum": 0}}]
    )
    required: list[str] = Field(default_factory=list)
    scope: Literal["write", "admin"] | None = None

    def to_core(self) -> ParamsContract:
        return ParamsContract(self.properties, tuple(self.required), self.scope)


class ParamsRead(BaseModel):
    """A job's params contract (see ``ParamsIn``)."""

    model_config = ConfigDict(from_attributes=True)

    properties: dict[str, dict[str, Any]]
    required: list[str]
    scope: Literal["write", "admin"] | None


def params_core(body: ParamsIn | None) -> ParamsContract:
    return NO_PARAMS if body is None else body.to_core()
