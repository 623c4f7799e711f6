"""What every client command shares: the ``--url`` and ``-o`` options, the client seam and
the one-line error report."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from tickwork.app.settings import DEFAULT_URL
from tickwork.core.errors import TickworkError, ValidationError
from tickwork.sdk import ApiError, Client, ClientError


class Output(StrEnum):
    """How a command prints its result."""

    TABLE = "table"
    JSON = "json"


UrlOption = Annotated[
    str,
    typer.Option("--url", envvar="TICKWORK_URL", help="Server URL.", show_default=True),
]
OutputOption = Annotated[
    Output, typer.Option("-o", "--output", help="`table` for people, `json` for scripts.")
]
DEFAULT_OUTPUT = Output.TABLE
__all__ = ["DEFAULT_URL"]


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


def find_token(given: str | None) -> str | None:
    """The bearer token: ``--token``, else ``TICKWORK_TOKEN``, else the ``admin.token`` file
    of the data dir (``TICKWORK_DATA_DIR``, default ``./.tickwork``) that ``tickwork up``
    writes on its first start."""
    if given:
        return given
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV].strip()
    path = Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR) / TOKEN_FILE
    try:
        return path.read_text().strip() or None
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
def connect(ctx: typer.Context, url: str = DEFAULT_URL) -> Iterator[Client]:
    """A client of the server at ``url``, with failures reported as one line."""
    deps = ctx.find_object(CliDeps) or CliDeps()
    token = find_token(ctx.meta.get("tickwork.token"))
    with reported_errors(), deps.make_client(url, token) as client:
        yield client


def fail(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit with status 1."""
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(1)


def _api_message(e: ApiError) -> str:
    # A not-found message already names the thing ("no job 'x'"); a field would repeat it.
    if e.field and e.code != "not_found":
        return f"{e.field}: {e.message}"
    if e.status == 401:
        return (
            f"{e.message}; pass --token, set {TOKEN_ENV}, or run where `tickwork up` keeps "
            f"its data ({DEFAULT_DATA_DIR}/{TOKEN_FILE}, or set {DATA_DIR_ENV})"
        )
    return e.message
