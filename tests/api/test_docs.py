"""The interactive docs at ``/api/v1/docs``: public, and complete without the internet.

The page and everything it loads come from the app itself (Swagger UI's files ship in the
``fastapi-offline`` package); nothing points at a CDN or any other host.
"""

from __future__ import annotations

import re

import httpx2
import pytest
from fastapi import FastAPI

DOCS = "/api/v1/docs"
_EXTERNAL = re.compile(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", re.IGNORECASE)
#: What the page loads: tag attributes, and the two URLs its script passes to Swagger UI.
_REFERENCES = (
    re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']+)["']"""),
    re.compile(r"""\burl:\s*'([^']+)'"""),
    re.compile(r"""oauth2RedirectUrl:\s*window\.location\.origin\s*\+\s*'([^']+)'"""),
)
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')]+)""")


@pytest.fixture
async def anonymous(app: FastAPI) -> httpx2.AsyncClient:
    """A client without a token: the docs are public."""
    transport = httpx2.ASGITransport(app=app)
    return httpx2.AsyncClient(transport=transport, base_url="http://tickwork.test")


def references(page: str) -> list[str]:
    return [ref for pattern in _REFERENCES for ref in pattern.findall(page)]


async def test_the_docs_page_and_all_it_loads_come_from_the_app(
    anonymous: httpx2.AsyncClient,
) -> None:
    async with anonymous as client:
        page = await client.get(DOCS)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert _EXTERNAL.search(page.text) is None, page.text
        assert '"validatorUrl": null' in page.text  # Swagger UI's default calls out to validate

        refs = references(page.text)
        assert f"{DOCS}/static/swagger-ui-bundle.js" in refs
        assert f"{DOCS}/static/swagger-ui.css" in refs
        assert "/api/v1/openapi.json" in refs
        assert f"{DOCS}/oauth2-redirect" in refs
        for ref in refs:
            assert ref.startswith("/") and not ref.startswith("//"), ref
            asset = await client.get(ref)
            assert asset.status_code == 200, ref
            assert asset.content, ref
            if ref.endswith(".css"):  # a stylesheet may load images and fonts in turn
                for url in _CSS_URL.findall(asset.text):
                    assert url.startswith("data:"), f"{ref} loads {url[:80]}"
            if ref.endswith(".html") or "oauth2-redirect" in ref:
                assert _EXTERNAL.search(asset.text) is None, ref


async def test_the_docs_sit_outside_the_spec_and_need_no_token(
    anonymous: httpx2.AsyncClient, app: FastAPI
) -> None:
    paths = app.openapi()["paths"]
    assert not [path for path in paths if path.startswith(DOCS)]
    async with anonymous as client:
        for path in (DOCS, f"{DOCS}/oauth2-redirect", f"{DOCS}/static/favicon.png"):
            assert (await client.get(path)).status_code == 200, path
        r = await client.get(f"{DOCS}/static/nope.js")
        assert r.status_code == 404
