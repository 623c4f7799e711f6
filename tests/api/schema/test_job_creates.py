"""Schemathesis: creating jobs, one and in batches (see ``cases``)."""

from __future__ import annotations

from typing import Any

from schemathesis.generation.case import Case

from tests.api.schema.cases import JOB_CREATES, SCHEMA, SETTINGS, Target, conform


@SCHEMA.include(name=JOB_CREATES).parametrize()
@SETTINGS
def test_api_conforms_to_its_schema(case: Case[Any], target: Target, admin_token: str) -> None:
    conform(case, admin_token)
