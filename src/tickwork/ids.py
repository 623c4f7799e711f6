"""Identifiers that sort by creation time (48-bit milliseconds + 80 random bits, as hex)."""

from __future__ import annotations

import os
import time


def new_id(now_ms: int | None = None) -> str:
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return f"{ms:012x}{os.urandom(10).hex()}"
