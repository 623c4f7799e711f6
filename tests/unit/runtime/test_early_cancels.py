"""A cancel signal that beat its claim's reply is kept for a while, then forgotten."""

from __future__ import annotations

from tickwork.worker.early_cancels import EARLY_CANCEL_MEMORY, EarlyCancels


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_remembered_cancel_is_taken_once() -> None:
    early = EarlyCancels(Clock())
    early.remember(("a", 1))
    assert early.take(("a", 2)) is False  # another attempt of the same task run
    assert early.take(("a", 1)) is True
    assert early.take(("a", 1)) is False


def test_old_signals_age_out_when_new_ones_come() -> None:
    clock = Clock()
    early = EarlyCancels(clock)
    early.remember(("old", 1))
    clock.now += EARLY_CANCEL_MEMORY / 2
    early.remember(("kept", 1))
    clock.now += EARLY_CANCEL_MEMORY / 2 + 0.1
    early.remember(("new", 1))  # ages out what is older than the memory
    assert early.take(("old", 1)) is False
    assert early.take(("kept", 1)) is True
    assert early.take(("new", 1)) is True


def test_a_repeated_signal_counts_from_its_last_arrival() -> None:
    clock = Clock()
    early = EarlyCancels(clock)
    early.remember(("a", 1))
    clock.now += EARLY_CANCEL_MEMORY - 1
    early.remember(("a", 1))  # again: moved to the young end
    clock.now += 2
    early.remember(("b", 1))
    assert early.take(("a", 1)) is True
