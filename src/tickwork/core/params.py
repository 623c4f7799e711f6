"""A job's params contract: what callers may pass to ``trigger`` and ``enqueue``. Pure.

An admin (or whoever may save the job) declares each param as a small JSON Schema
(``type``, ``default``, ``enum``, bounds, ``pattern``, ``items``) and which scope may run
the job by hand. Callers pass only declared params; the values are checked against the
schema, and defaults fill what they leave out.

Why a contract at all: params used to be merged over a python task's stored ``kwargs``, so
whoever could trigger a job could change what it executes (``subprocess:check_output`` with
``args`` rewritten to ``/bin/sh -c ...``). Now params can never overlap a stored kwarg (the
contract is refused on save), reach python tasks as *extra* keyword arguments only, shell
tasks only as JSON in ``TICKWORK_PARAMS``, and http tasks not at all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tickwork.core.errors import ValidationError

#: The JSON types a param may declare.
PARAM_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")
#: The JSON Schema keywords a param's schema may use.
PARAM_KEYWORDS = frozenset(
    {
        "type",
        "default",
        "description",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "items",
    }
)
#: Who may trigger or enqueue a job, when its contract says so.
RUN_SCOPES = ("write", "admin")
#: How deep a param value may nest (objects and lists); deeper is refused, not recursed into.
MAX_PARAM_DEPTH = 16
MAX_PARAMS = 100
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}", re.ASCII)


@dataclass(frozen=True, slots=True)
class ParamsContract:
    """The params a job accepts. ``properties``: name -> JSON Schema subset (see
    ``PARAM_KEYWORDS``); ``required``: names a caller must give; ``scope``: ``write`` or
    ``admin``, who may trigger or enqueue the job (``None``: the scope the job itself needs,
    ``admin`` for jobs that run code)."""

    properties: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    scope: str | None = None

    @property
    def declared(self) -> bool:
        return bool(self.properties) or self.scope is not None


NO_PARAMS = ParamsContract()


def validate_contract(
    contract: ParamsContract, stored_kwargs: Sequence[tuple[str, Mapping[str, Any]]] = ()
) -> ParamsContract:
    """Check a contract on save. ``stored_kwargs``: (field, kwargs) of each python task; a
    param may not share a name with a stored kwarg, so params can never replace one."""
    props = contract.properties
    if not isinstance(props, Mapping) or len(props) > MAX_PARAMS:
        raise ValidationError("params.properties", f"must map up to {MAX_PARAMS} names to schemas")
    for name, schema in props.items():
        where = f"params.properties.{name}"
        if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name):
            raise ValidationError(
                where, "a param name is 1-64 of A-Za-z0-9_, not starting with a digit"
            )
        _schema(schema, where, 0)
        if "default" in schema:
            check_value(schema["default"], schema, f"{where}.default")
        for task_field, kwargs in stored_kwargs:
            if name in kwargs:
                raise ValidationError(
                    where,
                    f"is also a stored kwarg ({task_field}.kwargs.{name}); "
                    "params never replace stored kwargs",
                )
    required = contract.required
    if isinstance(required, str) or not all(isinstance(r, str) and r in props for r in required):
        raise ValidationError("params.required", "must list declared params only")
    if contract.scope is not None and contract.scope not in RUN_SCOPES:
        raise ValidationError("params.scope", f"must be one of {', '.join(RUN_SCOPES)} (or null)")
    return ParamsContract(dict(props), tuple(required), contract.scope)


def resolve_params(
    contract: ParamsContract, given: Mapping[str, Any] | None, where: str = "params"
) -> dict[str, Any]:
    """The params of one run: ``given`` checked against ``contract``, defaults filled in.
    Errors name the param (``params.n``, ``items[3].params.n``)."""
    given = {} if given is None else given
    if not isinstance(given, Mapping):
        raise ValidationError(where, "must be an object")
    props = contract.properties
    for name, value in given.items():
        schema = props.get(name)
        if schema is None:
            declared = ", ".join(sorted(props)) or "none"
            raise ValidationError(
                f"{where}.{name}", f"is not a declared param of this job (declared: {declared})"
            )
        check_value(value, schema, f"{where}.{name}")
    for name in contract.required:
        if name not in given:
            raise ValidationError(f"{where}.{name}", "is required")
    defaults = {n: s["default"] for n, s in props.items() if "default" in s and n not in given}
    return {**defaults, **given}


def check_depth(value: object, where: str, depth: int = 0) -> None:
    """Refuse values nested deeper than ``MAX_PARAM_DEPTH`` (and non-finite numbers)."""
    if depth > MAX_PARAM_DEPTH:
        raise ValidationError(where, f"nests deeper than {MAX_PARAM_DEPTH} levels")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(where, "must be a finite number")
    if isinstance(value, Mapping):
        for k, v in value.items():
            check_depth(v, f"{where}.{k}", depth + 1)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_depth(v, f"{where}[{i}]", depth + 1)


def check_value(value: object, schema: Mapping[str, Any], where: str) -> None:
    """``value`` against one param schema. Strict: ``"10"`` is not an integer. A schema
    without ``type`` takes any JSON value."""
    check_depth(value, where)
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        raise ValidationError(where, f"must be of type {kind}")
    if "enum" in schema and value not in schema["enum"]:
        raise ValidationError(where, f"must be one of {schema['enum']!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        _bounds(value, schema, where)
    if isinstance(value, str):
        _text(value, schema, where)
    if isinstance(value, list):
        _items(value, schema, where)


def _bounds(value: float, schema: Mapping[str, Any], where: str) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        raise ValidationError(where, f"must be at least {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise ValidationError(where, f"must be at most {schema['maximum']}")


def _text(value: str, schema: Mapping[str, Any], where: str) -> None:
    if len(value) < schema.get("minLength", 0):
        raise ValidationError(where, f"must be at least {schema['minLength']} characters")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise ValidationError(where, f"must be at most {schema['maxLength']} characters")
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        raise ValidationError(where, f"must match the pattern {schema['pattern']!r}")


def _items(value: list[Any], schema: Mapping[str, Any], where: str) -> None:
    if len(value) < schema.get("minItems", 0):
        raise ValidationError(where, f"must hold at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise ValidationError(where, f"must hold at most {schema['maxItems']} items")
    if "items" in schema:
        for i, item in enumerate(value):
            check_value(item, schema["items"], f"{where}[{i}]")


def _is_type(value: object, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "boolean": bool,
        "object": Mapping,
        "array": list,
        "null": type(None),
    }
    return isinstance(value, expected[kind])


def _schema(schema: object, where: str, depth: int) -> None:
    if not isinstance(schema, Mapping):
        raise ValidationError(where, "must be a JSON Schema object such as {type: string}")
    unknown = sorted(set(schema) - PARAM_KEYWORDS)
    if unknown:
        raise ValidationError(
            f"{where}.{unknown[0]}", f"is not supported; use {', '.join(sorted(PARAM_KEYWORDS))}"
        )
    if "type" in schema and schema["type"] not in PARAM_TYPES:
        raise ValidationError(f"{where}.type", f"must be one of {', '.join(PARAM_TYPES)}")
    for key in ("minimum", "maximum"):
        if key in schema and not _is_type(schema[key], "number"):
            raise ValidationError(f"{where}.{key}", "must be a number")
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        if key in schema and not (_is_type(schema[key], "integer") and schema[key] >= 0):
            raise ValidationError(f"{where}.{key}", "must be a whole number of 0 or more")
    _schema_extras(schema, where, depth)


def _schema_extras(schema: Mapping[str, Any], where: str, depth: int) -> None:
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        raise ValidationError(f"{where}.enum", "must be a non-empty list")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except (re.error, TypeError):
            raise ValidationError(f"{where}.pattern", "must be a regular expression") from None
    if "description" in schema and not isinstance(schema["description"], str):
        raise ValidationError(f"{where}.description", "must be a string")
    if "items" in schema:
        if schema.get("type") != "array" or depth >= 3:
            raise ValidationError(f"{where}.items", "only for arrays, at most 3 levels deep")
        _schema(schema["items"], f"{where}.items", depth + 1)
