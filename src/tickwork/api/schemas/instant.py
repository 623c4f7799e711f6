"""Instants in requests: ISO 8601 text only.

Pydantic also reads a number (or numeric text such as ``?started_to=0.5``) as a Unix
timestamp; the OpenAPI document promises a ``date-time`` string, so those are refused.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, Strict

from tickwork.core.instants import RANGE_TEXT, in_range

_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")


def iso_only(value: object) -> object:
    """Refuse numbers and numeric text, which pydantic would take for a Unix timestamp."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("must be an ISO 8601 date-time such as 2027-01-02T03:04:05Z")
    return value


def in_bounds(value: datetime) -> datetime:
    """Refuse instants that overflow on the way to UTC or near it (``core.instants``)."""
    if not in_range(value):
        raise ValueError(RANGE_TEXT)
    return value


#: An instant with an offset, given as ISO 8601 text. ``Strict(False)``: request models are
#: strict (no ``"10"`` for a number), but an instant arrives as text.
IsoInstant = Annotated[
    AwareDatetime, Strict(False), BeforeValidator(iso_only), AfterValidator(in_bounds)
]
#: An instant, offset optional, given as ISO 8601 text.
IsoDatetime = Annotated[
    datetime, Strict(False), BeforeValidator(iso_only), AfterValidator(in_bounds)
]
