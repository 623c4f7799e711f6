"""``{"$secret": "NAME"}`` in request bodies: a header or env value may be one."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from tickwork.api.text import NO_NUL_PATTERN, Text
from tickwork.core.secret_refs import SECRET_NAME

#: The JSON Schema of a reference, for the OpenAPI document.
SECRET_REF_SCHEMA = {
    "type": "object",
    "properties": {"$secret": {"type": "string", "pattern": f"^{SECRET_NAME.pattern}$"}},
    "required": ["$secret"],
    "additionalProperties": False,
}
SecretRef = dict[Literal["$secret"], Text]
#: A URL's userinfo (``user:password``) given as a secret reference.
UrlAuth = Annotated[
    SecretRef | None,
    WithJsonSchema(SECRET_REF_SCHEMA),
    Field(
        None,
        description='The URL\'s `user:password`, as `{"$secret": "NAME"}`: sent as HTTP Basic '
        "auth, resolved where the request is sent, never stored in the URL.",
    ),
]
#: Headers or env: names to text, or to a secret reference (resolved on the worker).
RefMap = Annotated[
    dict[Text, Text | SecretRef],
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL_PATTERN},
            "additionalProperties": {
                "anyOf": [{"type": "string", "pattern": NO_NUL_PATTERN}, SECRET_REF_SCHEMA]
            },
        }
    ),
    Field(description='Values are text or `{"$secret": "NAME"}` (`tickwork secret set`).'),
]
