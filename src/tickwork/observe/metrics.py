"""Every metric tickwork exports, defined once (Prometheus naming: ``tickwork_`` prefix, base
units, counters end in ``_total``).

Labels are bounded: ``queue``, ``outcome``, ``state``, ``op``, ``route``, ``kind``. A job
name is a label only on the ``tickwork_job_*`` series, and only when the operator opts in
(``TICKWORK_METRICS_JOB_LABEL=all``): job names are unbounded. Run ids, attempts, error
texts and worker names are never labels.

Metrics that are facts of the database (queue depths, oldest age, workers, dead letters)
are not counted here as work happens: ``observe.facts`` reads them from the store at scrape
time, on the process that leads (or on ``tickwork up``), so they are exported once.
"""

from __future__ import annotations

from importlib.metadata import version

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    gc_collector,
    platform_collector,
    process_collector,
)

# No ``*_created`` series: a sample per series that no dashboard uses.
disable_created_metrics()  # type: ignore[no-untyped-call]

#: The installed distribution's version (``tickwork.__version__`` is the same; reading it
#: there would import the package's SDK, a layer above this one).
VERSION = version("tickwork")

#: tickwork's own registry, not prometheus_client's global one: a library a user task
#: imports cannot add series to ours, and tests read ours alone.
REGISTRY = CollectorRegistry(auto_describe=True)
process_collector.ProcessCollector(registry=REGISTRY)
platform_collector.PlatformCollector(registry=REGISTRY)
gc_collector.GCCollector(registry=REGISTRY)

#: Seconds: from a millisecond (a claim on an idle worker) to an hour (a long task).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)

BUILD_INFO = Gauge(
    "tickwork_build_info", "Always 1; the version is a label.", ["version"], registry=REGISTRY
)
BUILD_INFO.labels(VERSION).set(1)

# -- task runs (worker side) -------------------------------------------------------------------
TASK_RUNS = Counter(
    "tickwork_task_runs_total",
    "Task run attempts finished, by outcome: success, retry, failed (dead-lettered: its last "
    "attempt failed), cancelled.",
    ["queue", "outcome"],
    registry=REGISTRY,
)
TASK_DURATION = Histogram(
    "tickwork_task_duration_seconds",
    "How long a task run attempt ran, from its start to its outcome.",
    ["queue", "outcome"],
    buckets=DURATION_BUCKETS,
    registry=REGISTRY,
)
START_DELAY = Histogram(
    "tickwork_task_start_delay_seconds",
    "From when a task run became claimable (queued, or due when handed out ahead) to its claim.",
    ["queue"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
RUNS = Counter(
    "tickwork_runs_total",
    "Runs finished, by the run's final state: success, failed, cancelled (also a cancel of a "
    "run at rest), skipped (missed cron fires recorded as skipped).",
    ["outcome"],
    registry=REGISTRY,
)
JOB_TASK_RUNS = Counter(
    "tickwork_job_task_runs_total",
    "tickwork_task_runs_total by job name; only with TICKWORK_METRICS_JOB_LABEL=all.",
    ["job", "outcome"],
    registry=REGISTRY,
)
WORKER_SLOTS = Gauge(
    "tickwork_worker_process_slots",
    "This worker process's slots: busy (a task running) or free.",
    ["state"],
    registry=REGISTRY,
)
WORKER_CONCURRENCY = Gauge(
    "tickwork_worker_concurrency",
    "Tasks this worker process runs at once (moves with --autoscale).",
    registry=REGISTRY,
)

# -- scheduling --------------------------------------------------------------------------------
SCHEDULE_DELAY = Histogram(
    "tickwork_schedule_delay_seconds",
    "How late a due task run was queued after its due instant (schedule lateness).",
    ["queue"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
LAST_PASS = Gauge(
    "tickwork_scheduler_last_loop_timestamp_seconds",
    "When this process's scheduler loop last finished a pass (a dead man's switch).",
    registry=REGISTRY,
)
REAPED = Counter(
    "tickwork_reaper_recovered_total",
    "Running task runs found without a live worker (no heartbeat) and failed for a retry.",
    registry=REGISTRY,
)
RESENT = Counter(
    "tickwork_reconciler_resent_total",
    "Queued task runs no worker had claimed, handed to the broker again.",
    registry=REGISTRY,
)
MISSED_TICKS = Counter(
    "tickwork_missed_ticks_total",
    "Cron fires skipped because they were missed (catch-up off, or beyond its window).",
    registry=REGISTRY,
)
RUN_ALERTS = Counter(
    "tickwork_run_alerts_total",
    "Run alerts the leader recorded (each fires the job's hook once), by kind: on_missed (a "
    "run not started by its start deadline), on_sla_miss (a run not finished within its SLA).",
    ["kind"],
    registry=REGISTRY,
)

# -- leadership --------------------------------------------------------------------------------
LEADER = Gauge("tickwork_leader", "1 while this process leads the schedulers.", registry=REGISTRY)
LEADER_EPOCH = Gauge(
    "tickwork_leader_epoch", "The fencing epoch this process holds (0: none).", registry=REGISTRY
)
LEASE_LEFT = Gauge(
    "tickwork_lease_seconds_left",
    "Seconds before this leader's lease runs out unless renewed (0: not leader).",
    registry=REGISTRY,
)
ELECTIONS = Counter(
    "tickwork_leader_elections_total",
    "Times this process became leader (with a new epoch). Summed over replicas: failovers + 1.",
    registry=REGISTRY,
)
FENCED = Counter(
    "tickwork_fenced_writes_rejected_total",
    "Writes the database refused because their epoch no longer held the lease.",
    registry=REGISTRY,
)

# -- adapters ----------------------------------------------------------------------------------
STORE_SECONDS = Histogram(
    "tickwork_store_operation_seconds",
    "Time of one store operation (one transaction), by operation.",
    ["op"],
    buckets=STORE_BUCKETS,
    registry=REGISTRY,
)
STORE_ERRORS = Counter(
    "tickwork_store_unavailable_total",
    "Store operations that failed because the database did not answer.",
    ["op"],
    registry=REGISTRY,
)
BROKER_SECONDS = Histogram(
    "tickwork_broker_operation_seconds",
    "Time of one broker operation (publish, ack...; not the wait of consume), by operation.",
    ["op"],
    buckets=STORE_BUCKETS,
    registry=REGISTRY,
)
HTTP_SECONDS = Histogram(
    "tickwork_http_request_duration_seconds",
    "API request latency by route template, method and status code.",
    ["route", "method", "status"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)

# -- facts of the database (observe.facts, at scrape time) ------------------------------------
QUEUE_DEPTH = "tickwork_queue_depth"
QUEUE_OLDEST = "tickwork_queue_oldest_seconds"
WORKERS = "tickwork_workers"
QUEUE_SLOTS = "tickwork_worker_slots"
DEAD_LETTERS = "tickwork_dead_letters"
FACTS_AGE = "tickwork_facts_age_seconds"

#: Every metric name this module and ``observe.facts`` export (the dashboards' and alert
#: rules' test checks against it). Histograms export ``_bucket``, ``_sum`` and ``_count``.
FACT_NAMES = frozenset({QUEUE_DEPTH, QUEUE_OLDEST, WORKERS, QUEUE_SLOTS, DEAD_LETTERS, FACTS_AGE})


def last_pass() -> float:
    """``tickwork_scheduler_last_loop_timestamp_seconds`` of this process (0: never)."""
    return REGISTRY.get_sample_value("tickwork_scheduler_last_loop_timestamp_seconds") or 0.0
