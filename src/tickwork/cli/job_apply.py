"""``tickwork job apply FILE.yaml | FILE.json | module.path:attr``: a job from its definition.

Idempotent, through ``PUT /jobs/{name}``: creates the job if there is none, updates it (for
its future runs) when the definition differs, and changes nothing when it is the same. The
definition is read and checked here first, so a bad file fails before anything is sent.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.common import (
    DEFAULT_OUTPUT,
    DEFAULT_URL,
    OutputOption,
    UrlOption,
    connect,
    reported_errors,
)
from tickwork.cli.output import emit
from tickwork.sdk import ApiError
from tickwork.sdk.definitions import DefinitionError, job_body, load_definition

#: API statuses that mean "the definition is at fault": reported against the file.
_REFUSED = frozenset({409, 422})


def apply(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="FILE|MODULE:ATTR",
            help="A YAML or JSON definition file, or module.path:attr of a @workflow function.",
        ),
    ],
    allow_past: Annotated[
        bool, typer.Option("--allow-past", help="Accept an `at` schedule in the past.")
    ] = False,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Create or update a job from its definition; the same definition again changes nothing.

    Examples: `job apply examples/etl.yaml`; `job apply examples.etl:etl` (imports the module
    with the current directory on the path, as workers must be able to)."""
    with reported_errors():
        body = job_body(load_definition(source))
    with connect(ctx, url) as client:
        try:
            applied = client.apply_job(body, allow_past=allow_past)
        except ApiError as e:
            if e.status not in _REFUSED:
                raise
            raise DefinitionError(source, e.message, e.field) from None
    emit(output, applied, f"{applied['outcome']} job {applied['job']['name']}")
