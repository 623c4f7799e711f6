"""Schemathesis over the whole OpenAPI document, in-process, as an admin, on SQLite and on
PostgreSQL (the ``store`` fixture).

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

from collections.abc import Iterator
from typing import Any, cast

import httpx2
import pytest
import schemathesis
from cryptography.fernet import Fernet
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.generation.case import Case

from tests.api.conftest import at_job, cron_job, error_of, now_job
from tests.helpers import FakeClock
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Store
from tickwork.security.secrets import SecretCipher


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


def _document() -> dict[str, Any]:
    """The OpenAPI document; rendering it touches no store."""
    return create_app(Services(cast(Store, None), MemoryBroker())).openapi()


TARGET = Target()
SCHEMA = schemathesis.openapi.from_dict(_document())
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


@pytest.fixture
async def seeded(api: httpx2.AsyncClient) -> None:
    """Some data to read: jobs of each kind (one named like the spec's examples), runs."""
    for body in (cron_job("backup"), at_job("report"), now_job("once", tags=["t"])):
        assert (await api.post("/api/v1/jobs", json=body)).status_code == 201
    assert (await api.post("/api/v1/jobs/backup/trigger", json={})).status_code in (200, 201, 202)


@pytest.fixture
def security(services: Services, clock: FakeClock) -> Security:
    """With a secret key: ``PUT /secrets/{name}`` stores (a process without a key answers 503,
    by design, and tells the operator to set ``TICKWORK_SECRET_KEY``)."""
    return Security.over(services, clock=clock, cipher=SecretCipher(Fernet.generate_key()))


@pytest.fixture
def target(app: FastAPI, seeded: None) -> Iterator[Target]:
    TARGET.app = app
    yield TARGET
    TARGET.app = None


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


def _opaque_cursor(case: Case[Any]) -> None:
    """A valid request carries only a ``cursor`` the API handed out, which no schema can
    describe: a made-up one is left out of positive cases (negative ones keep theirs)."""
    if case.meta is not None and case.meta.generation.mode.is_positive and case.query:
        case.query.pop("cursor", None)


@SCHEMA.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_conforms_to_its_schema(case: Case[Any], target: Target, admin_token: str) -> None:
    if case.headers.get("Authorization") == ADMIN:
        case.headers["Authorization"] = f"Bearer {admin_token}"
    _opaque_cursor(case)
    excluded = [schemathesis.checks.positive_data_acceptance]
    case.call_and_validate(excluded_checks=excluded if case.operation.label in SEMANTIC else [])


# What the run found, pinned down.


async def test_a_405_allows_every_method_of_the_path(api: httpx2.AsyncClient) -> None:
    r = await api.put("/api/v1/jobs")
    assert r.status_code == 405
    assert r.headers["allow"] == "GET, POST"
    assert error_of(r)["code"] == "method_not_allowed"
    r = await api.post("/api/v1/jobs/j")
    assert r.headers["allow"] == "GET, PUT, PATCH, DELETE"
    r = await api.options("/api/v1/jobs/batch")  # PUT is apply of a job named "batch"
    assert r.headers["allow"] == "POST"
    r = await api.post("/api/v1/openapi.json")  # not in the document: Starlette's own
    assert set(r.headers["allow"].split(", ")) == {"GET", "HEAD"}


@pytest.mark.parametrize("value", ["0.5", "1700000000", "-3"])
async def test_instants_are_iso_text_not_timestamps(api: httpx2.AsyncClient, value: str) -> None:
    r = await api.get("/api/v1/runs", params={"started_to": value})
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == "started_to"
    body = {"schedule": {"kind": "at", "at": 1_900_000_000}}
    r = await api.post("/api/v1/jobs", json=at_job("j") | body)
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == "schedule.at"


async def test_a_query_parameter_given_twice_is_refused(api: httpx2.AsyncClient) -> None:
    r = await api.get("/api/v1/jobs?paused=nonsense&paused=true")
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == "paused"
    assert (await api.get("/api/v1/jobs?paused=true&limit=5")).status_code == 200


async def test_an_unreadable_body_is_a_documented_400(api: httpx2.AsyncClient) -> None:
    headers = {"Content-Type": "application/json"}
    r = await api.post("/api/v1/tokens", content=b"P\xff7", headers=headers)
    assert r.status_code == 400
    assert error_of(r)["code"] == "http_error"
    assert "400" in _document()["paths"]["/api/v1/tokens"]["post"]["responses"]


@pytest.mark.parametrize("name", ["ci\n", "", "-ci", "c i", "x" * 101])
async def test_token_names_follow_the_documented_pattern(
    api: httpx2.AsyncClient, name: str
) -> None:
    r = await api.post("/api/v1/tokens", json={"name": name, "scope": "read"})
    assert (r.status_code, error_of(r)["field"]) == (422, "name"), r.text
    assert [t["name"] for t in (await api.get("/api/v1/tokens")).json()["tokens"]] == ["test-admin"]
