"""Schemathesis over the whole OpenAPI document, in-process, as an admin, on SQLite and on
PostgreSQL (the ``store`` fixture): the schema, its authentication and the one check every
operation gets. The operations are shared out over this package's test files so that the
suite's processes (``--dist loadfile``) run them side by side.

Every operation gets generated requests (valid and invalid ones); every response must be no
5xx, have a documented status code, content type and headers, and a body matching its
schema; invalid requests must be rejected and valid ones accepted. Every check of
schemathesis runs, with two exceptions written down at ``SEMANTIC`` and ``_opaque_cursor``.

The schema is loaded at import (from an app that only renders its document); requests go to
the ``app`` fixture of the running test through ``TARGET``, so each operation's test has its
own fresh store. (``schemathesis.pytest.from_fixture`` would be the direct way, but it does
not work with this pytest.)
"""

from __future__ import annotations

from typing import Any, cast

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.generation.case import Case

from tickwork.api.app import create_app
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Store


class Target:
    """An ASGI app that forwards to the app of the test being run."""

    def __init__(self) -> None:
        self.app: FastAPI | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # the API has no lifespan work
            message = await receive()
            await send({"type": f"{message['type']}.complete"})
            message = await receive()
            await send({"type": f"{message['type']}.complete"})
            return
        assert self.app is not None, "no test app"
        await self.app(scope, receive, send)


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document; rendering it touches no store."""
    return create_app(Services(cast(Store, None), MemoryBroker())).openapi()


TARGET = Target()
SCHEMA = schemathesis.openapi.from_dict(openapi_document())
SCHEMA.app = TARGET


#: Stands for the running test's admin token: schemathesis builds some cases (its coverage
#: phase) at collection, before any test has a token; the test puts the real one in.
ADMIN = "Bearer admin-token-of-the-running-test"


@SCHEMA.auth(refresh_interval=None)
class AdminToken:
    """Authenticates every case, except where one leaves the header out on purpose."""

    def get(self, case: Case[Any], ctx: Any) -> str:
        return ADMIN

    def set(self, case: Case[Any], data: str, ctx: Any) -> None:
        case.headers["Authorization"] = data


# Unknown query parameters are ignored, as HTTP APIs do (unknown body fields are refused).
SCHEMA.config.generation.update(allow_extra_parameters=False)


#: ``positive_data_acceptance`` is off for these alone: their inputs mean more than a JSON
#: Schema can say (cron syntax, IANA zones, which schedule fields go with which kind, one of
#: ``task``/``tasks``, a body's name equal to the path's), so a schema-valid request may
#: rightly get a 422.
SEMANTIC = frozenset(
    {
        "POST /api/v1/jobs",
        "POST /api/v1/jobs/batch",
        "PUT /api/v1/jobs/{name}",
        "PATCH /api/v1/jobs/{name}",
        "GET /api/v1/schedule/preview",
        # Which params are accepted is the job's own contract (its `params`), not the schema's.
        "POST /api/v1/jobs/{name}/runs",
        "POST /api/v1/jobs/{name}/runs/batch",
        "POST /api/v1/jobs/{name}/trigger",
        # Instants must lie in the years 1000-9000 (UTC); a `date-time` format cannot say so.
        "GET /api/v1/runs",
        "POST /api/v1/backfills",
        "POST /api/v1/backfills/plan",
        "GET /api/v1/backfills/{backfill_id}/dates",
        "GET /api/v1/jobs/{name}/ledger",
        # A secret's name is 1-128 of [A-Za-z0-9_.-]; the path parameter does not say so yet.
        "PUT /api/v1/secrets/{name}",
    }
)


#: Operations whose generated cases take longest (the job definitions' writes), each file of
#: this package taking a share.
JOB_CREATES = ["POST /api/v1/jobs", "POST /api/v1/jobs/batch"]
JOB_CHANGES = ["PUT /api/v1/jobs/{name}", "PATCH /api/v1/jobs/{name}"]

#: Hypothesis's settings for every operation's test.
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _opaque_cursor(case: Case[Any]) -> None:
    """A valid request carries only a ``cursor`` the API handed out, which no schema can
    describe: a made-up one is left out of positive cases (negative ones keep theirs)."""
    if case.meta is not None and case.meta.generation.mode.is_positive and case.query:
        case.query.pop("cursor", None)


def conform(case: Case[Any], admin_token: str) -> None:
    """Sends the case as the running test's admin and runs every check on the answer."""
    if case.headers.get("Authorization") == ADMIN:
        case.headers["Authorization"] = f"Bearer {admin_token}"
    _opaque_cursor(case)
    excluded = [schemathesis.checks.positive_data_acceptance]
    case.call_and_validate(excluded_checks=excluded if case.operation.label in SEMANTIC else [])
