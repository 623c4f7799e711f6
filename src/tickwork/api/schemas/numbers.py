"""Whole numbers in strict request bodies.

Request models are strict (``"10"`` is not a number), but JSON Schema counts ``81.0`` as an
integer, so a whole number may come as an integral float; text and booleans may not.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Strict


def _no_text(value: object) -> object:
    if isinstance(value, str | bool):
        raise ValueError("must be a whole number, not text or a boolean")
    return value


#: An integer: a JSON number with no fraction (``81`` or ``81.0``), never ``"81"``.
Whole = Annotated[int, Strict(False), BeforeValidator(_no_text)]
