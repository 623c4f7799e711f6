"""Params can never change what a task executes: the privilege hole of issue 10 §1."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import Clients
from tickwork.core.errors import ValidationError
from tickwork.core.params import ParamsContract, resolve_params, validate_contract
from tickwork.ports import Scope

API = "/api/v1"
DATE = {"kind": "python", "target": "subprocess:check_output", "kwargs": {"args": ["/bin/date"]}}
EVIL = {"args": ["/bin/sh", "-c", "id"]}


def _job(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": {"kind": "cron", "cron": "0 3 * * *"}, "task": DATE, **extra}


async def test_a_write_token_cannot_run_an_admin_job_with_or_without_params(
    as_scope: Clients,
) -> None:
    admin, writer = as_scope(Scope.ADMIN), as_scope(Scope.WRITE)
    assert (await admin.post(f"{API}/jobs", json=_job("date"))).status_code == 201
    for path, body in (
        ("trigger", {"params": EVIL}),
        ("trigger", {}),
        ("runs", {"params": EVIL}),
        ("runs/batch", {"items": [{"params": EVIL}]}),
    ):
        r = await writer.post(f"{API}/jobs/date/{path}", json=body)
        assert r.status_code == 403, (path, r.text)
    assert (await admin.get(f"{API}/runs", params={"job": "date"})).json()["runs"] == []


async def test_params_never_replace_a_stored_kwarg(as_scope: Clients) -> None:
    admin = as_scope(Scope.ADMIN)
    # Even an admin's trigger cannot pass undeclared params...
    assert (await admin.post(f"{API}/jobs", json=_job("date"))).status_code == 201
    r = await admin.post(f"{API}/jobs/date/trigger", json={"params": EVIL})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "params.args")
    # ...and a contract that declares a stored kwarg is refused on save.
    bad = {"properties": {"args": {"type": "array"}}, "scope": "write"}
    r = await admin.post(f"{API}/jobs", json=_job("date2", params=bad))
    assert (r.status_code, r.json()["error"]["field"]) == (422, "params.properties.args")


async def test_a_job_opened_to_write_takes_only_its_declared_params(as_scope: Clients) -> None:
    admin, writer = as_scope(Scope.ADMIN), as_scope(Scope.WRITE)
    contract = {"properties": {"n": {"type": "integer", "minimum": 1, "default": 1}}}
    job = _job("open", params={**contract, "scope": "write"})
    assert (await admin.post(f"{API}/jobs", json=job)).status_code == 201
    r = await writer.post(f"{API}/jobs/open/runs", json={"params": {"n": 5}})
    assert r.status_code == 201, r.text
    run = (await writer.get(f"{API}/runs/{r.json()['run_id']}")).json()
    assert run["task_runs"][0]["config"]["kwargs"] == {"args": ["/bin/date"], "n": 5}
    for params, field in (
        (EVIL, "params.args"),
        ({"n": "5"}, "params.n"),  # strict: no coercion
        ({"n": 0}, "params.n"),
    ):
        r = await writer.post(f"{API}/jobs/open/runs", json={"params": params})
        assert (r.status_code, r.json()["error"]["field"]) == (422, field), r.text
    # A write token may run it, not manage it.
    assert (await writer.post(f"{API}/jobs/open/pause")).status_code == 403
    assert (await writer.delete(f"{API}/jobs/open")).status_code == 403
    # Its runs it may cancel (they run what the admin allowed).
    assert (await writer.post(f"{API}/runs/{run['id']}/cancel")).status_code == 200


def test_the_contract_fills_defaults_and_checks_nesting() -> None:
    contract = validate_contract(
        ParamsContract(
            {"day": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}, "n": {"default": 2}},
            ("day",),
        )
    )
    assert resolve_params(contract, {"day": "2026-01-02"}) == {"day": "2026-01-02", "n": 2}
    deep: Any = 1
    for _ in range(40):
        deep = [deep]
    cases = [
        ({}, "params.day"),
        ({"day": "x"}, "params.day"),
        ({"day": "2026-01-02", "n": deep}, "params.n"),
    ]
    for given, field in cases:
        with pytest.raises(ValidationError) as refused:
            resolve_params(contract, given)
        assert refused.value.field.startswith(field), given


@pytest.mark.parametrize(
    ("contract", "field"),
    [
        (ParamsContract({"1x": {}}), "params.properties.1x"),
        (ParamsContract({"x": {"type": "date"}}), "params.properties.x.type"),
        (ParamsContract({"x": {"format": "email"}}), "params.properties.x.format"),
        (ParamsContract({"x": {"type": "integer", "default": "1"}}), "params.properties.x.default"),
        (ParamsContract({"x": {"pattern": "("}}), "params.properties.x.pattern"),
        (ParamsContract({"x": {}}, ("y",)), "params.required"),
        (ParamsContract({}, (), "read"), "params.scope"),
    ],
)
def test_bad_contracts_name_the_field(contract: ParamsContract, field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        validate_contract(contract)
    assert refused.value.field == field
