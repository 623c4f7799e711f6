"""Schemathesis: every other operation that writes (see ``cases``), and what its runs found,
pinned down."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from schemathesis.generation.case import Case

from tests.api.conftest import at_job, error_of
from tests.api.schema.cases import (
    JOB_CHANGES,
    JOB_CREATES,
    SCHEMA,
    SETTINGS,
    Target,
    conform,
    openapi_document,
)


@SCHEMA.exclude(method="GET").exclude(name=JOB_CREATES + JOB_CHANGES).parametrize()
@SETTINGS
def test_api_conforms_to_its_schema(case: Case[Any], target: Target, admin_token: str) -> None:
    conform(case, admin_token)


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


async def test_an_unreadable_body_is_aopenapi_documented_400(api: httpx2.AsyncClient) -> None:
    headers = {"Content-Type": "application/json"}
    r = await api.post("/api/v1/tokens", content=b"P\xff7", headers=headers)
    assert r.status_code == 400
    assert error_of(r)["code"] == "http_error"
    assert "400" in openapi_document()["paths"]["/api/v1/tokens"]["post"]["responses"]


@pytest.mark.parametrize("name", ["ci\n", "", "-ci", "c i", "x" * 101])
async def test_token_names_follow_theopenapi_documented_pattern(
    api: httpx2.AsyncClient, name: str
) -> None:
    r = await api.post("/api/v1/tokens", json={"name": name, "scope": "read"})
    assert (r.status_code, error_of(r)["field"]) == (422, "name"), r.text
    assert [t["name"] for t in (await api.get("/api/v1/tokens")).json()["tokens"]] == ["test-admin"]
