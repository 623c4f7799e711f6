"""One real `tickwork up` with seeded data and one Chromium for the dashboard's browser tests.

Chromium is the system's (`/usr/bin/chromium`, installed by scripts/services.sh); Playwright
never downloads a browser here.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Site:
    """The running server, its tokens (secrets) and an API client per scope."""

    url: str
    tokens: dict[str, str]
    proc: subprocess.Popen[bytes]
    log: Path
    clients: dict[str, httpx2.Client] = field(default_factory=dict)

    def api(self, scope: str = "admin") -> httpx2.Client:
        """An API client with this scope's token (one per scope, closed with the server)."""
        if scope not in self.clients:
            headers = {"Authorization": f"Bearer {self.tokens[scope]}"}
            self.clients[scope] = httpx2.Client(
                base_url=f"{self.url}/api/v1", headers=headers, timeout=10
            )
        return self.clients[scope]


def wait_for(probe: Callable[[], Any], ok: Callable[[Any], bool], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout}s: {value!r}")
        time.sleep(0.05)


def _shell(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"kind": "now"},
        "tasks": [{"name": "main", "kind": "shell", "argv": ["sh", "-c", script]}],
        **extra,
    }


def _seed(site: Site) -> None:
    api = site.api()
    for scope in ("read", "write"):
        made = api.post("/tokens", json={"name": f"{scope}-browser", "scope": scope})
        assert made.status_code == 201, made.text
        site.tokens[scope] = made.json()["secret"]
    assert api.put("/pools/db", json={"slots": 2, "description": "the database"}).is_success
    jobs = [
        _shell("hello", "echo hello from the dashboard test"),
        _shell("broken-a", "echo about to fail; exit 3"),
        _shell("broken-b", "echo about to fail too; exit 4"),
        {
            "name": "nightly",
            "schedule": {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
            "tags": ["reports"],
            # Callers may pass only declared params (docs/security.md): the trigger test sends one.
            "params": {"properties": {"region": {"type": "string"}}},
            "tasks": [{"name": "report", "kind": "shell", "argv": ["true"]}],
        },
        {
            "name": "etl",
            "schedule": {"kind": "now"},
            "tasks": [
                {"name": "extract", "kind": "shell", "argv": ["echo", "x"], "pool": "db"},
                {
                    "name": "transform",
                    "kind": "shell",
                    "argv": ["echo", "y"],
                    "upstream": ["extract"],
                },
                {"name": "check", "kind": "shell", "argv": ["echo", "z"], "upstream": ["extract"]},
                {
                    "name": "load",
                    "kind": "shell",
                    "argv": ["echo", "done"],
                    "upstream": ["transform", "check"],
                },
            ],
        },
    ]
    for job in jobs:
        made = api.post("/jobs", json=job)
        assert made.status_code == 201, made.text
    wait_for(lambda: api.get("/dead-letters").json()["task_runs"], lambda found: len(found) == 2)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("dashboard")
    port = _free_port()
    log = root / "server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(BIN / "tickwork"), "up", "--data-dir", str(root / "data"),
             "--port", str(port), "--concurrency", "4"],
            stdout=out, stderr=subprocess.STDOUT, cwd=root,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_for(lambda: _healthy(url, proc, log), bool, timeout=60)
        except AssertionError:
            raise AssertionError(f"tickwork up did not answer:\n{log.read_text()}") from None
        admin = (root / "data" / "admin.token").read_text().strip()
        running = Site(url, {"admin": admin}, proc, log)
        _seed(running)
        yield running
        for client in running.clients.values():
            client.close()
    finally:
        proc.terminate()
        proc.wait(30)


def _healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> bool:
    assert proc.poll() is None, log.read_text()
    try:
        return httpx2.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx2.HTTPError:
        return False


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    assert CHROMIUM.exists(), "install chromium: scripts/services.sh (apt-get install chromium)"
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    # --no-sandbox: the suite runs as root in CI containers, where Chromium's sandbox cannot.
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
    yield launched
    launched.close()


@dataclass
class Visit:
    """A browser context signed in (or not) and the console errors its pages logged."""

    context: BrowserContext
    page: Page
    errors: list[str]
    url: str

    def go(self, path: str) -> Page:
        self.page.goto(self.url + path)
        return self.page

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def open_visit(browser: Browser, site: Site, scope: str | None, **options: Any) -> Visit:
    context = browser.new_context(**{"viewport": {"width": 1280, "height": 800}, **options})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: d.accept())
    visit = Visit(context, page, errors, site.url)
    if scope is not None:
        visit.go("/signin")
        page.fill("#token", site.tokens[scope])
        page.click("button[type=submit]")
        page.wait_for_url(site.url + "/")
    return visit


@pytest.fixture
def admin(browser: Browser, site: Site) -> Iterator[Visit]:
    visit = open_visit(browser, site, "admin")
    yield visit
    visit.context.close()
