"""Worker autoscaling (``tickwork worker --autoscale MIN:MAX``): how many tasks a worker
should run at once, from its queues' backlog, its busy slots and how long its tasks take.

Pure: the worker measures, this decides. The rule:

- the work in sight is the running tasks plus the backlog (ready messages on the worker's
  queues); it needs ``ceil(tasks * average duration / HORIZON)`` slots to be done within
  ``HORIZON`` seconds, and never more slots than there are tasks: short tasks need few
  slots, long ones one each;
- growing is immediate (a backlog waits on it); shrinking goes half the way per decision
  and never below the busy slots, so a burst that pauses for a moment does not flap;
- always within ``MIN`` and ``MAX``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tickwork.core.errors import ValidationError

#: Seconds within which the work in sight should be done.
HORIZON = 2.0


@dataclass(frozen=True, slots=True)
class Bounds:
    low: int
    high: int


def parse_bounds(text: str, field: str = "autoscale") -> Bounds:
    """``"MIN:MAX"`` (whole numbers, 1 <= MIN <= MAX) or a ValidationError naming ``field``."""
    low_text, sep, high_text = text.partition(":")
    if not sep:
        raise ValidationError(field, f"must be MIN:MAX, such as 2:16, not {text!r}")
    try:
        low, high = int(low_text), int(high_text)
    except ValueError:
        raise ValidationError(field, f"MIN and MAX must be whole numbers, not {text!r}") from None
    if low < 1:
        raise ValidationError(field, f"MIN must be 1 or more, not {low}")
    if high < low:
        raise ValidationError(field, f"MAX must be MIN ({low}) or more, not {high}")
    return Bounds(low, high)


def wanted(busy: int, backlog: int, avg_duration: float, horizon: float = HORIZON) -> int:
    """Slots that finish the running tasks and the backlog within ``horizon`` seconds."""
    tasks = max(busy, 0) + max(backlog, 0)
    if tasks == 0:
        return 0
    need = math.ceil(tasks * max(avg_duration, 0.0) / horizon)
    return min(tasks, max(need, 1))


def decide(
    current: int,
    bounds: Bounds,
    *,
    busy: int,
    backlog: int,
    avg_duration: float,
    horizon: float = HORIZON,
) -> int:
    """The concurrency to run at next, given the current one and what was measured."""
    target = wanted(busy, backlog, avg_duration, horizon)
    if target > current:
        new = target
    elif target < current:
        new = max(target, busy, current - math.ceil((current - target) / 2))
    else:
        new = current
    return min(max(new, bounds.low), bounds.high)
