"""``GET /runs/{id}/why`` and ``GET /jobs/{name}/why`` through the API."""

from __future__ import annotations

import httpx2

from tests.api.conftest import at_job, error_of

API = "/api/v1"


async def test_why_answers_sentences_with_codes_and_404s(api: httpx2.AsyncClient) -> None:
    assert (await api.post(f"{API}/jobs", json=at_job("later"))).status_code == 201
    run = (await api.get(f"{API}/runs", params={"job": "later"})).json()["runs"][0]
    r = await api.get(f"{API}/runs/{run['id']}/why")
    assert r.status_code == 200, r.text
    [reason] = r.json()["reasons"]
    assert reason["code"] == "not_due" and "2027-01-02 03:04:05Z" in reason["message"]
    job = (await api.get(f"{API}/jobs/later/why")).json()["reasons"]
    assert [x["code"] for x in job] == ["not_due"] and job[0]["message"].startswith("run ")
    for path, field in (("/runs/nope/why", "run"), ("/jobs/nope/why", "job")):
        missing = await api.get(API + path)
        assert missing.status_code == 404 and error_of(missing)["field"] == field
