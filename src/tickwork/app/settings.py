"""The settings of every tickwork process and of the CLI, in one record.

Read from, in order of precedence: command-line options, ``TICKWORK_*`` environment
variables, a TOML file (``--config`` or ``TICKWORK_CONFIG``), the defaults below. The TOML
keys are the field names (``database_url = "postgresql://…"``); the environment variable of
a field is ``TICKWORK_`` plus its name in capitals (``TICKWORK_REDIS_URL``). `tickwork up`,
`scheduler`, `worker`, `api`, `db upgrade`, `status` and the client commands all read the
same variables and the same file; each uses the fields it needs.

A new process-wide setting is one field here (with a comment saying what it is) and, if the
command line should set it, one option on the commands that use it (``cli/``).
Only the wiring (``serve/``) and CLI layers read these.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from tickwork.core.autoscale import Bounds, parse_bounds
from tickwork.core.errors import ValidationError
from tickwork.core.jitter import check_jitter

DEFAULT_URL = "http://127.0.0.1:8080"
CONFIG_ENV = "TICKWORK_CONFIG"
#: Seconds running tasks get to finish on Ctrl-C / SIGTERM when ``grace`` is not set: short
#: for `tickwork up` (a person waits at the terminal), longer for a distributed worker.
EMBEDDED_GRACE = 10.0
WORKER_GRACE = 30.0


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting of every process kind (the CLI's ``url`` and ``token`` included)."""

    # -- where things are
    data_dir: Path = Path(".tickwork")  # `up`'s SQLite file and the first admin.token
    database_url: str = ""  # "": the SQLite file in data_dir; postgresql://… in distributed mode
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = "tickwork"  # prefix of Redis keys, and of RabbitMQ queue names
    # amqp://user:pass@host:5672/vhost: RabbitMQ as the broker; "": Redis at redis_url
    broker_url: str = ""
    # etcd://host:2379[,…][/prefix] or zookeeper://host:2181[,…]/root: where the scheduler
    # lease is held; "": in PostgreSQL (docs/distributed.md)
    coordination_url: str = ""
    # -- the client commands
    url: str = DEFAULT_URL  # the server the client commands talk to
    token: str = ""  # bearer token; "": the data dir's admin.token
    # -- scheduler
    lease_ttl: float = 10.0  # seconds a leader's lease lasts without renewal
    window: float = 300.0  # seconds of due work handed to Redis ahead of time
    heartbeat_timeout: float = 15.0  # a running task run silent this long is a zombie
    retention_days: int = 0  # days of run history kept; 0: keep everything
    partitions_ahead: int = 2  # monthly partitions created ahead of the current one
    # seconds over which cron fires of one instant are spread (jobs without their own jitter)
    cron_spread: float = 0.0
    # -- worker (`up` runs one too)
    queues: tuple[str, ...] = ()  # (): by process kind (worker: default; up: every queue, *)
    concurrency: int = os.cpu_count() or 2  # tasks run at once
    autoscale: str = ""  # worker: MIN:MAX, concurrency follows the backlog; "": fixed
    grace: float = 0.0  # seconds running tasks get to finish on SIGTERM; 0: by process kind
    # -- HTTP API (`up` serves one too)
    host: str = "127.0.0.1"
    port: int = 8080
    http_allow: str = ""  # private networks http tasks may reach, as CIDRs
    idempotency_ttl: float = 24 * 3600.0  # seconds an Idempotency-Key is remembered
    # -- observability (every process kind; docs/operations.md)
    log_format: str = "text"  # or json: one object per line with the bound context
    metrics: str = "on"  # off: no per-job store/broker/runner instrumentation (to measure it)
    metrics_port: int = 0  # scheduler, worker: /metrics, /livez, /readyz here; 0: off
    metrics_host: str = "127.0.0.1"  # 0.0.0.0 in a container, for Prometheus and probes

    def __post_init__(self) -> None:
        for name in ("retention_days", "partitions_ahead", "grace", "metrics_port"):
            if getattr(self, name) < 0:
                raise ValidationError(name, f"must be 0 or more, not {getattr(self, name)}")
        if self.log_format not in ("text", "json"):
            raise ValidationError("log_format", f"must be text or json, not {self.log_format!r}")
        if self.metrics not in ("on", "off"):
            raise ValidationError("metrics", f"must be on or off, not {self.metrics!r}")
        check_jitter(self.cron_spread, "cron_spread")
        if self.concurrency < 1:
            raise ValidationError("concurrency", f"must be 1 or more, not {self.concurrency}")
        self.autoscale_bounds  # noqa: B018 (refuses a malformed MIN:MAX now, not at start)

    @property
    def autoscale_bounds(self) -> Bounds | None:
        """``autoscale`` parsed, or None when the concurrency is fixed."""
        return parse_bounds(self.autoscale) if self.autoscale else None

    @property
    def effective_database_url(self) -> str:
        """The database of `tickwork up` (and `api --role read` beside it)."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'tickwork.db').resolve()}"

    def queues_for(self, default: tuple[str, ...]) -> tuple[str, ...]:
        """``queues`` when set, else ``default`` (the process kind's)."""
        return self.queues or default

    def grace_for(self, default: float) -> float:
        """``grace`` when set, else ``default`` (the process kind's)."""
        return self.grace or default

    def require_database(self) -> str:
        """The PostgreSQL URL distributed processes need, or a ValidationError saying so."""
        if not self.database_url.startswith(("postgresql://", "postgresql+psycopg://")):
            raise ValidationError(
                "database_url",
                "distributed mode needs PostgreSQL: set TICKWORK_DATABASE_URL (or "
                f"database_url in the config file) to postgresql://…, not {self.database_url!r}",
            )
        return self.database_url


_FIELDS = {f.name: f for f in fields(Settings)}
_DEFAULTS = Settings()


def load_settings(
    config: Path | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Defaults, then the TOML file, then the environment, then ``overrides`` (not None)."""
    env = os.environ if env is None else env
    path = config or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    values: dict[str, Any] = {}
    if path is not None:
        values.update(_from_toml(path))
    for name in _FIELDS:
        raw = env.get(f"TICKWORK_{name.upper()}")
        if raw is not None and raw != "":
            values[name] = _convert(name, raw, f"TICKWORK_{name.upper()}")
    values.update({k: v for k, v in overrides.items() if v is not None})
    return replace(_DEFAULTS, **values)


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ValidationError("config", f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config", f"{path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ValidationError(
            f"config.{unknown[0]}", f"unknown setting in {path}; known: {', '.join(_FIELDS)}"
        )
    return {name: _convert(name, value, f"{path}: {name}") for name, value in data.items()}


def _convert(name: str, value: Any, where: str) -> Any:
    kind = type(getattr(_DEFAULTS, name))
    try:
        if kind is tuple:
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(item).strip() for item in items if str(item).strip())
        if kind is bool or isinstance(value, bool):
            raise TypeError
        if issubclass(kind, Path):
            return Path(value)
        return kind(value)
    except (TypeError, ValueError):
        raise ValidationError(name, f"{where}: {value!r} is not a valid {kind.__name__}") from None
