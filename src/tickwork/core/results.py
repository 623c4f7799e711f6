"""Task results: a python task's return value, passed as JSON to its downstream tasks.

A downstream task's config may hold ``{"$result": "<upstream task>"}`` anywhere (typically a
python task's kwargs value); when a worker runs it, each such object is replaced by that
upstream's result (``null`` if it produced none). Results are for small values: anything over
the limit is refused with an error, since large data belongs in the user's own storage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tickwork.core.refs import RESULT_REF

#: The default size limit of one result, as JSON text.
MAX_RESULT_BYTES = 64 * 1024


class ResultTooLarge(ValueError):
    """A result whose JSON text is over the limit."""


def resolve_results(value: Any, inputs: Mapping[str, Any]) -> Any:
    """``value`` with every ``{"$result": name}`` replaced by ``inputs[name]`` (or None)."""
    if isinstance(value, Mapping):
        if len(value) == 1 and RESULT_REF in value and isinstance(value[RESULT_REF], str):
            return inputs.get(value[RESULT_REF])
        return {key: resolve_results(item, inputs) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [resolve_results(item, inputs) for item in value]
    return value


def encode_result(value: Any, limit: int = MAX_RESULT_BYTES) -> str | None:
    """The JSON text of a result; None for ``None``. Raises ``TypeError`` for a value that is
    not JSON and ``ResultTooLarge`` over ``limit`` bytes."""
    if value is None:
        return None
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    size = len(text.encode())
    if size > limit:
        raise ResultTooLarge(
            f"the result is {size} bytes of JSON, over the {limit}-byte limit; keep large "
            "data in your own storage and return a reference to it (a path, a key, a URL)"
        )
    return text
