"""Settings of the distributed processes (`tickwork scheduler|worker|api|status|db`).

Read from, in order of precedence: command-line options, ``TICKWORK_*`` environment
variables, a TOML file (``--config`` or ``TICKWORK_CONFIG``), the defaults below. The TOML
keys are the field names (``database_url = "postgresql://…"``); the environment variable of
a field is ``TICKWORK_`` plus its name in capitals (``TICKWORK_REDIS_URL``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from tickwork.core.errors import ValidationError


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    database_url: str = ""  # postgresql://… (required)
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = "tickwork"
    # scheduler
    lease_ttl: float = 10.0  # seconds a leader's lease lasts without renewal
    window: float = 300.0  # seconds of due work handed to Redis ahead of time
    heartbeat_timeout: float = 15.0  # a running task run silent this long is a zombie
    retention_days: int = 0  # days of run history kept (whole months dropped); 0: keep all
    partitions_ahead: int = 2  # monthly partitions created ahead of the current one
    # worker
    queues: tuple[str, ...] = ("default",)
    concurrency: int = os.cpu_count() or 2
    grace: float = 30.0  # seconds running tasks get to finish on SIGTERM
    # api
    host: str = "127.0.0.1"
    port: int = 8080
    http_allow: str = ""
    idempotency_ttl: float = 24 * 3600.0

    def __post_init__(self) -> None:
        for name in ("retention_days", "partitions_ahead"):
            if getattr(self, name) < 0:
                raise ValidationError(name, f"must be 0 or more, not {getattr(self, name)}")

    def require_database(self) -> str:
        if not self.database_url.startswith(("postgresql://", "postgresql+psycopg://")):
            raise ValidationError(
                "database_url",
                "distributed mode needs PostgreSQL: set TICKWORK_DATABASE_URL (or "
                f"database_url in the config file) to postgresql://…, not {self.database_url!r}",
            )
        return self.database_url


_FIELDS = {f.name: f for f in fields(ClusterSettings)}


def load_settings(
    config: Path | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> ClusterSettings:
    """Defaults, then the TOML file, then the environment, then ``overrides`` (not None)."""
    env = os.environ if env is None else env
    path = config or (Path(env["TICKWORK_CONFIG"]) if env.get("TICKWORK_CONFIG") else None)
    values: dict[str, Any] = {}
    if path is not None:
        values.update(_from_toml(path))
    for name in _FIELDS:
        raw = env.get(f"TICKWORK_{name.upper()}")
        if raw is not None and raw != "":
            values[name] = _convert(name, raw, f"TICKWORK_{name.upper()}")
    values.update({k: v for k, v in overrides.items() if v is not None})
    return replace(ClusterSettings(), **values)


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
    kind = type(getattr(ClusterSettings(), name))
    try:
        if kind is tuple:
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(item).strip() for item in items if str(item).strip())
        if kind is bool or isinstance(value, bool):
            raise TypeError
        return kind(value)
    except (TypeError, ValueError):
        raise ValidationError(name, f"{where}: {value!r} is not a valid {kind.__name__}") from None
