"""The peers: pinned versions, worker commands and what their numbers mean.

Each peer runs ``workers`` (2) worker processes, in the configuration that is fastest for
no-op jobs among the sensible ones (bench/README.md, "Peers", says how each was chosen).
Per-job logging is at WARNING for everyone. Variants (``default=False``) run only when named
in ``--peers``. Importing this module registers every spec as a contender.
"""

from __future__ import annotations

from pathlib import Path

from peers.contender import Contender, Factory, Services, register
from peers.harness import PeerContender, PeerSpec

REDIS = "redis==8.1.0"
CELERY = ("celery[redis]==5.7.0", REDIS)  # the extra brings kombu[redis] (needs packaging)
PROCRASTINATE = ("procrastinate==3.10.0", "psycopg[binary,pool]==3.3.9")


def celery_solo(bin_dir: Path, workers: int) -> list[list[str]]:
    return [
        [str(bin_dir / "celery"), "-A", "peer_celery", "worker", "-P", "solo", "-n", f"w{k}@%h",
         "--loglevel=WARNING"]
        for k in range(workers)
    ]  # fmt: skip


def celery_prefork(bin_dir: Path, workers: int) -> list[list[str]]:
    return [[str(bin_dir / "celery"), "-A", "peer_celery", "worker", "-P", "prefork",
             "-c", str(workers), "--loglevel=WARNING"]]  # fmt: skip


def huey_cmds(bin_dir: Path, workers: int) -> list[list[str]]:
    return [[str(bin_dir / "huey_consumer"), "peer_huey.huey", "-k", "process",
             "-w", str(workers), "-q"]]  # fmt: skip


def dramatiq_cmds(threads: int) -> PeerSpec.Commands:
    def cmds(bin_dir: Path, workers: int) -> list[list[str]]:
        return [[str(bin_dir / "dramatiq"), "peer_dramatiq", "-p", str(workers),
                 "-t", str(threads)]]  # fmt: skip

    return cmds


def procrastinate_cmds(*extra: str) -> PeerSpec.Commands:
    def cmds(bin_dir: Path, workers: int) -> list[list[str]]:
        one = [str(bin_dir / "procrastinate"), "--log-level", "warning",
               "--app=peer_procrastinate.app", "worker", "--concurrency", "10", *extra]  # fmt: skip
        return [list(one) for _ in range(workers)]

    return cmds


CELERY_NOTES = "Redis broker, no result backend, early ack; ETA jobs held unacked in worker RAM"
PROCRASTINATE_NOTES = "PostgreSQL only; LISTEN/NOTIFY wakes workers for new jobs"
SPECS = [
    PeerSpec("celery", "celery", "celery", CELERY, celery_solo,
             "2 nodes with the solo pool: the task runs in the consuming process",
             CELERY_NOTES),
    PeerSpec("celery-rabbitmq", "celery", "celery", CELERY, celery_solo,
             "2 nodes with the solo pool, broker: the local RabbitMQ (py-amqp)",
             "RabbitMQ broker (classic queue `celery`), no result backend, early ack; "
             "ETA jobs held unacked in worker RAM", default=False,
             env=(("PEERBENCH_REDIS_URL", "amqp://guest:guest@127.0.0.1:5672//"),)),
    PeerSpec("celery-prefork", "celery", "celery", CELERY, celery_prefork,
             "performance.md's setting: 1 node, prefork pool, 2 children",
             CELERY_NOTES, default=False),
    PeerSpec("huey", "huey", "huey", ("huey==3.5.4", REDIS), huey_cmds,
             "2 worker processes, blocking BRPOP dequeue, scheduler tick 1 s",
             "Redis; results off; pop without ack (at-most-once); ETAs checked on a 1 s tick"),
    PeerSpec("dramatiq", "dramatiq", "dramatiq", ("dramatiq==2.2.1", REDIS), dramatiq_cmds(8),
             "2 processes x 8 threads (the defaults), default middleware",
             "Redis broker polled with back-off up to 1 s; ack after run; delays via .DQ"),
    PeerSpec("procrastinate", "procrastinate", "procrastinate", PROCRASTINATE,
             procrastinate_cmds(), "2 processes x concurrency 10, fetch polling 5 s (default)",
             f"{PROCRASTINATE_NOTES}; a job becoming due waits for the 5 s poll",
             needs_pg=True),
    PeerSpec("procrastinate-poll0.2", "procrastinate", "procrastinate", PROCRASTINATE,
             procrastinate_cmds("--fetch-job-polling-interval", "0.2"),
             "as procrastinate, fetch polling 0.2 s", f"{PROCRASTINATE_NOTES}; 0.2 s poll",
             needs_pg=True, default=False),
]  # fmt: skip


def _factory(spec: PeerSpec) -> Factory:
    def make(services: Services) -> Contender:
        return PeerContender(spec, services)

    return make


for _spec in SPECS:
    register(_spec.name, _factory(_spec), default=_spec.default)
