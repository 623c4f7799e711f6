"""What every client command shares: the global options (``cli/options.py``), the client
seam and the one-line error report."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import typer

from tickwork.cli.options import (
    DEFAULT_OUTPUT,
    DEFAULT_URL,
    Output,
    OutputOption,
    UrlOption,
    fail,
    settings_of,
)
from tickwork.core.errors import TickworkError, ValidationError
from tickwork.sdk import ApiError, Client, ClientError

__all__ = [
    "DEFAULT_OUTPUT",
    "DEFAULT_URL",
    "Output",
    "OutputOption",
    "UrlOption",
    "fail",
    "settings_of",
]

TOKEN_ENV = "TICKWORK_TOKEN"
DATA_DIR_ENV = "TICKWORK_DATA_DIR"
DEFAULT_DATA_DIR = Path(".tickwork")
TOKEN_FILE = "admin.token"


def _network_client(url: str, token: str | None) -> Client:
    return Client(url, token=token)


@dataclass(frozen=True, slots=True)
class CliDeps:
    """What the commands are wired to. Passed as the Click context object (``obj=``).

    Tests give a ``make_client(url, token)`` that reaches an in-process app instead of the
    network.
    """

    make_client: Callable[[str, str | None], Client] = _network_client


def find_token(given: str, data_dir: Path) -> str | None:
    """The bearer token: ``--token`` (or ``TICKWORK_TOKEN``, or ``token`` in the config file),
    else the ``admin.token`` file that ``tickwork up`` writes in its data dir on first start."""
    if given:
        return given.strip()
    try:
        return (data_dir / TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn expected failures into one ``error: ...`` line on stderr and exit status 1."""
    try:
        yield
    except ApiError as e:
        fail(_api_message(e))
    except ValidationError as e:
        fail(f"{e.field}: {e.reason}")
    except (ClientError, TickworkError) as e:
        fail(str(e))


@contextmanager
def connect(ctx: typer.Context, url: str | None = None) -> Iterator[Client]:
    """A client of the server at ``url`` (default: the ``--url`` setting), with failures
    reported as one line."""
    deps = ctx.find_object(CliDeps) or CliDeps()
    settings = settings_of(ctx)
    token = find_token(settings.token, settings.data_dir)
    with reported_errors(), deps.make_client(url or settings.url, token) as client:
        yield client


def _api_message(e: ApiError) -> str:
    # A not-found message already names the thing ("no job 'x'"); a field would repeat it.
    if e.field and e.code != "not_found":
        return f"{e.field}: {e.message}"
    if e.status == 401:
        return (
            f"{e.message}; pass --token, set {TOKEN_ENV}, or run where `tickwork up` keeps "
            f"its data ({DEFAULT_DATA_DIR}/{TOKEN_FILE}, or pass --data-dir / set {DATA_DIR_ENV})"
        )
    return e.message
