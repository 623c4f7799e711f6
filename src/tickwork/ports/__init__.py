"""Ports: the small interfaces the runtime depends on. Adapters implement them.

Every state change a store makes is a conditional update (``WHERE id = ? AND state = ? AND
attempt = ?``); a key that no longer matches is skipped silently, because it means another
actor (a worker, the reaper, a cancel) got there first. That is normal, not an error.

The ports are split by concept (``records``, ``auth``, ``coordination``, ``store``, ``broker``,
``runtime``); import them from here.
"""

from __future__ import annotations

from tickwork.ports.auth import (
    ApiToken,
    IdempotencyRecord,
    IdempotencyStore,
    KeyReceipt,
    KeyTaken,
    Scope,
    TokenStore,
)
from tickwork.ports.broker import (
    Broker,
    BrokerUnavailable,
    CancelSignals,
    Delivery,
    ForgetfulBroker,
    SendsAhead,
)
from tickwork.ports.coordination import (
    Fence,
    Fenced,
    FenceStore,
    Lease,
    LeaseStore,
    PoolStore,
    WorkerRegistry,
)
from tickwork.ports.records import (
    Beat,
    Completion,
    DeadLetterPage,
    EnqueueEntry,
    JobChanged,
    JobFilter,
    Maintenance,
    Materialization,
    NextWork,
    PoolUsage,
    RunCopy,
    RunFilter,
    RunPage,
    TaskKey,
    TimeWindow,
    WorkerInfo,
)
from tickwork.ports.runtime import (
    LogSink,
    Runner,
    RunResult,
)
from tickwork.ports.secrets import SecretStore, StoredSecret
from tickwork.ports.store import (
    CompletionStore,
    CronStore,
    DispatchStore,
    ExecutionStore,
    HistoryStore,
    JobStore,
    RunStore,
    Store,
)

__all__ = [
    "ApiToken",
    "Beat",
    "Broker",
    "BrokerUnavailable",
    "CancelSignals",
    "Completion",
    "CompletionStore",
    "CronStore",
    "DeadLetterPage",
    "Delivery",
    "DispatchStore",
    "EnqueueEntry",
    "ExecutionStore",
    "Fence",
    "FenceStore",
    "Fenced",
    "ForgetfulBroker",
    "HistoryStore",
    "IdempotencyRecord",
    "IdempotencyStore",
    "JobChanged",
    "JobFilter",
    "JobStore",
    "KeyReceipt",
    "KeyTaken",
    "Lease",
    "LeaseStore",
    "LogSink",
    "Maintenance",
    "Materialization",
    "NextWork",
    "PoolStore",
    "PoolUsage",
    "RunCopy",
    "RunFilter",
    "RunPage",
    "RunResult",
    "RunStore",
    "Runner",
    "Scope",
    "SecretStore",
    "SendsAhead",
    "Store",
    "StoredSecret",
    "TaskKey",
    "TimeWindow",
    "TokenStore",
    "WorkerInfo",
    "WorkerRegistry",
]
