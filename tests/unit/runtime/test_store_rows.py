"""Row mapping: the retry policy's JSON holds every field and reads back the same."""

from __future__ import annotations

from dataclasses import asdict

from tickwork.core.model import RetryPolicy
from tickwork.store.rows import retry_from_json, retry_to_json


def test_retry_json_is_every_field_and_round_trips() -> None:
    policy = RetryPolicy(max_attempts=4, initial_delay=0.5, multiplier=3.0, max_delay=90, jitter=0)
    assert retry_to_json(policy) == asdict(policy)  # a new field cannot be left out
    assert retry_from_json(retry_to_json(policy)) == policy
