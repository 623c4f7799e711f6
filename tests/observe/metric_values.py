"""Reading tickwork's metrics in tests: values are process-wide, so tests compare deltas."""

from __future__ import annotations

from tickwork.observe.metrics import REGISTRY


def value(name: str, **labels: str) -> float:
    """A sample's value now (0 when the series does not exist yet)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0
