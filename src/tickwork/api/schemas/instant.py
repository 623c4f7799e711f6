"""Instants in requests: ISO 8601 text only.

Pydantic also reads a number (or numeric text such as ``?started_to=0.5``) as a Unix
timestamp; the OpenAPI document promises a ``date-time`` string, so those are refused.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AwareDatetime, BeforeValidator

_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")


def iso_only(value: object) -> object:
    """Refuse numbers and numeric text, which pydantic would take for a Unix timestamp."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("must be an ISO 8601 date-time such as 2027-01-02T03:04:05Z")
    return value


#: An instant with an offset, given as ISO 8601 text.
IsoInstant = Annotated[AwareDatetime, BeforeValidator(iso_only)]
#: An instant, offset optional, given as ISO 8601 text.
IsoDatetime = Annotated[datetime, BeforeValidator(iso_only)]
