"""Options every process command shares: the log format and the metrics port."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


LogFormatOption = Annotated[
    LogFormat | None,
    typer.Option(
        "--log-format",
        help="text (one readable line) or json (one object per line); also TICKWORK_LOG_FORMAT.",
        show_default="text",
    ),
]

MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=0,
        help="Serve /metrics, /livez and /readyz on this port, at TICKWORK_METRICS_HOST "
        "(127.0.0.1 unless set); also TICKWORK_METRICS_PORT.",
        show_default="off",
    ),
]


def format_of(value: LogFormat | None) -> str | None:
    return None if value is None else value.value
