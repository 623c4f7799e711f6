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


async def test_ledger_lists_every_promised_tick(api: httpx2.AsyncClient) -> None:
    from tests.api.conftest import cron_job

    assert (await api.post(f"{API}/jobs", json=cron_job("daily"))).status_code == 201
    params = {"from": "2026-06-02T00:00:00Z", "to": "2026-06-04T23:00:00Z"}
    r = await api.get(f"{API}/jobs/daily/ledger", params=params)
    assert r.status_code == 200, r.text
    body = r.json()
    assert [t["logical_date"] for t in body["ticks"]] == [
        "2026-06-02T00:30:00Z", "2026-06-03T00:30:00Z", "2026-06-04T00:30:00Z"
    ]  # fmt: skip
    assert body["counts"] == {"upcoming": 3}
    bad = await api.get(f"{API}/jobs/daily/ledger", params={**params, "to": "2026-06-01T00:00:00Z"})
    assert bad.status_code == 422 and error_of(bad)["field"] == "to"


async def test_a_cancelled_run_says_which_token_cancelled_it(api: httpx2.AsyncClient) -> None:
    assert (await api.post(f"{API}/jobs", json=at_job("later"))).status_code == 201
    run = (await api.get(f"{API}/runs", params={"job": "later"})).json()["runs"][0]
    assert (await api.post(f"{API}/runs/{run['id']}/cancel")).status_code in (200, 202)
    [reason] = (await api.get(f"{API}/runs/{run['id']}/why")).json()["reasons"]
    assert reason["code"] == "cancelled"
    assert reason["message"].startswith("the run was cancelled by token 'test-admin' at ")
