"""The SDK's TypedDicts (``tickwork.sdk.types``) pinned to the OpenAPI document: each record
the SDK returns has the fields of one schema the API documents, no more and no fewer."""

from __future__ import annotations

from typing import get_type_hints

from fastapi import FastAPI

from tickwork.sdk import types as sdk_types

#: The records the API returns as they are (inputs and SDK-side wrappers are not in it).
RETURNED = [
    sdk_types.ScheduleInfo, sdk_types.RetryInfo, sdk_types.TaskInfo, sdk_types.JobInfo,
    sdk_types.JobApplied, sdk_types.JobPage, sdk_types.RunInfo, sdk_types.TaskRunInfo,
    sdk_types.AttemptInfo, sdk_types.RunDetail, sdk_types.RunPage, sdk_types.LogChunk,
    sdk_types.Logs, sdk_types.TokenInfo, sdk_types.PoolInfo,
]  # fmt: skip


def test_each_sdk_record_matches_a_schema_of_the_openapi_document(app: FastAPI) -> None:
    schemas = app.openapi()["components"]["schemas"]
    documented = [set(s.get("properties", {})) for s in schemas.values()]
    unmatched: list[str] = []
    for record in RETURNED:
        fields = set(get_type_hints(record))
        if fields not in documented:
            unmatched.append(f"{record.__name__} {sorted(fields)}")
    assert not unmatched, f"no OpenAPI schema has exactly these fields: {unmatched}"
