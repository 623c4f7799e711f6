"""Text without NUL (U+0000).

PostgreSQL cannot store or compare text holding NUL (SQLite can), and no program argument,
environment variable or path can hold one. So the API refuses it, the same way on every
backend: in every path and query parameter (``deps.checked_parameters``) and in every string
a request body types as ``Text``. Free-form JSON values (``metadata``, python ``kwargs``,
trigger ``params``, an http ``body``) may hold it: they are stored as JSON, where it is
escaped. The OpenAPI document says all this with a ``pattern`` on each of those strings.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

NUL = "\x00"
NUL_MESSAGE = "must not contain the NUL character (U+0000)"
#: The same rule as a JSON Schema (ECMA-262) regular expression.
NO_NUL_PATTERN = "^[^\\u0000]*$"


def _refuse_nul(value: str) -> str:
    if NUL in value:
        raise PydanticCustomError("nul_character", NUL_MESSAGE)
    return value


#: A string in a request body: no NUL.
Text = Annotated[
    str, AfterValidator(_refuse_nul), Field(json_schema_extra={"pattern": NO_NUL_PATTERN})
]
#: A map of strings (environment, headers): no NUL in keys or values.
TextMap = Annotated[
    dict[Text, Text],
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL_PATTERN},
            "additionalProperties": {"type": "string", "pattern": NO_NUL_PATTERN},
        }
    ),
]


def mark_parameters(document: dict[str, Any]) -> dict[str, Any]:
    """Put ``NO_NUL_PATTERN`` on every string path and query parameter of ``document``."""
    for item in document.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                _mark(parameter.get("schema", {}))
    return document


def _mark(schema: dict[str, Any]) -> None:
    if schema.get("type") == "string" and "pattern" not in schema:
        schema["pattern"] = NO_NUL_PATTERN
    for branch in schema.get("anyOf", []):
        _mark(branch)
