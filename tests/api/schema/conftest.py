"""The fixtures of the schema's tests: a seeded store, a secret key, the running app as
``TARGET``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from cryptography.fernet import Fernet
from fastapi import FastAPI

from tests.api.conftest import at_job, cron_job, now_job
from tests.api.schema.cases import TARGET, Target
from tests.helpers import FakeClock
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.security.secrets import SecretCipher


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
