"""Domain errors. Every user-facing error names the field at fault and what is accepted."""

from __future__ import annotations


class TickworkError(Exception):
    """Base class of every error tickwork raises on purpose."""


class ValidationError(TickworkError):
    """Input that tickwork refuses; `field` is a dotted path such as ``schedule.cron``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class NotFound(TickworkError):
    """A job, run or task run that does not exist."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key!r} not found")
        self.kind = kind
        self.key = key


class Conflict(TickworkError):
    """The request contradicts stored state (a duplicate name, a run that is not retryable)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class StoreUnavailable(TickworkError):
    """The database could not be reached (restarting, network); nothing was written. The
    operation may be tried again."""


class CoordinationUnavailable(StoreUnavailable):
    """etcd or ZooKeeper, which hold the scheduler lease, could not be reached or did not
    answer in time. A leader steps down; a replica campaigns again later."""
