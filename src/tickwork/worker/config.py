"""The worker pool's settings: what a pool is told (``PoolConfig``) and the tunables of its
batched writes."""

from __future__ import annotations

from dataclasses import dataclass

from tickwork.core.results import MAX_RESULT_BYTES

DRAIN_WRITE_TIMEOUT = 10.0  # seconds drain waits for buffered logs and outcomes to be stored
#: Seconds an ack waits for others to go with it, unless ACK_ENOUGH are waiting. Nothing waits
#: on an ack (the outcome is stored already; an unacked message only stays pending, and a
#: redelivery claims nothing), so at low load, where each job's ack was a broker round trip
#: of its own (a wake-up of the worker and of Redis), the acks of a few jobs share one. Under
#: load ACK_ENOUGH arrive at once: the unacked messages stay far below a broker's window
#: (RabbitMQ's prefetch, 256 a lane).
ACK_LINGER = 0.05
ACK_ENOUGH = 32


@dataclass(frozen=True, slots=True)
class PoolConfig:
    worker_id: str
    queues: tuple[str, ...] = ("default",)
    concurrency: int = 4  # task runs executing at once
    # Task runs claimed ahead of a free slot, so claims go out in batches even when few
    # slots are free. How many adapts to how long tasks take: a task claimed ahead should
    # wait at most about ``prefetch_wait`` seconds for a slot (no prefetch for long tasks,
    # where an idle worker elsewhere should take them instead). The attempt's recorded
    # start is when it really starts, not the claim.
    prefetch_wait: float = 0.05
    max_prefetch: int = 256
    # What a fresh worker assumes its tasks take until it has measured them. Long, so that it
    # claims no more than its free slots at first: woken alone for a burst of long tasks, it
    # would otherwise take some ahead while other workers sit idle.
    expected_duration: float = 1.0
    heartbeat_interval: float = 0.5  # also bounds how fast a cancel request is noticed
    consume_timeout: float = 0.5
    max_result_bytes: int = MAX_RESULT_BYTES  # a task's result (JSON) passed downstream
    # Seconds a batch of outcomes waits for more while outcomes keep coming (the previous
    # batch was written less than this ago), up to ``outcome_enough`` of them; 0: each batch
    # is what queued during the previous write. A lone outcome is written at once either way.
    outcome_linger: float = 0.0
    outcome_enough: int = 64
