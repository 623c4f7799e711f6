"""The dashboard in real Chromium against a real `tickwork up` (see conftest.py).

Each view renders without console errors (and is screenshot to tests/artifacts/screenshots/);
sign-in, sign-out and scope limits hold; trigger, pause, cancelling a running task and bulk
retry work end to end; a run page follows state and log lines without a reload; CSRF and a
missing session are refused.
"""

from __future__ import annotations

import re

from playwright.sync_api import Browser, expect

from tests.browser.conftest import Site, Visit, open_visit, wait_for

VIEWS = {
    "overview": "/",
    "jobs": "/jobs",
    "job": "/jobs/etl",
    "runs": "/runs",
    "grid": "/jobs/etl/grid",
    "calendar": "/calendar",
    "dead-letters": "/dead-letters",
    "workers": "/workers",
    "pools": "/pools",
    "audit": "/audit",
}


def _etl_run(site: Site) -> str:
    runs = site.api().get("/runs", params={"job": "etl"}).json()["runs"]
    return str(runs[0]["id"])


def test_every_view_renders_without_console_errors(admin: Visit, site: Site) -> None:
    for name, path in {**VIEWS, "run": f"/runs/{_etl_run(site)}"}.items():
        page = admin.go(path)
        expect(page.locator("main h1")).to_be_visible()
        assert "Not shown" not in page.locator("main h1").inner_text(), name
        admin.shot(name)
    assert admin.errors == []
    # Live updates connected (the indicator says so) and times moved to the viewer's zone.
    expect(admin.page.locator("#live")).to_have_text("live")
    utc = admin.page.locator("time").first.get_attribute("title")
    assert utc is not None and utc.endswith("UTC")


def test_phone_width_and_dark_theme(browser: Browser, site: Site) -> None:
    visit = open_visit(
        browser, site, "read", viewport={"width": 390, "height": 844}, color_scheme="dark"
    )
    page = visit.go(f"/runs/{_etl_run(site)}")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(13, 17, 23)"  # the dark theme, from the system setting
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390 + 1, "the page scrolls sideways at phone width"
    visit.shot("run-phone-dark")
    assert visit.errors == []
    visit.context.close()


def test_signin_refuses_a_bad_token_and_signout_ends_the_session(
    browser: Browser, site: Site
) -> None:
    visit = open_visit(browser, site, None)
    page = visit.go("/jobs")
    expect(page).to_have_url(re.compile(r"/signin\?next=%2Fjobs$"))
    page.fill("#token", "tw_nope_nope")
    page.click("button[type=submit]")
    expect(page.locator(".error")).to_contain_text("unknown or revoked")
    page.fill("#token", site.tokens["read"])
    page.click("button[type=submit]")
    expect(page).to_have_url(site.url + "/jobs")
    cookie = next(c for c in visit.context.cookies() if c["name"] == "tw_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert site.tokens["read"] not in page.content()
    page.click("text=Sign out")
    expect(page).to_have_url(re.compile(r"/signin"))
    visit.go("/")
    expect(page).to_have_url(re.compile(r"/signin\?next=%2F$"))
    visit.context.close()


def test_read_token_is_offered_no_action_and_the_server_refuses_one(
    browser: Browser, site: Site
) -> None:
    visit = open_visit(browser, site, "read")
    page = visit.go("/jobs/hello")
    expect(page.locator("text=Trigger now")).to_have_count(0)
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    answer = page.request.post(f"{site.url}/jobs/hello/trigger", form={"csrf": csrf or ""})
    assert answer.status == 403
    runs = site.api().get("/runs", params={"job": "hello"}).json()["runs"]
    assert len(runs) == 1  # nothing was triggered
    visit.context.close()


def test_write_token_may_not_act_on_a_shell_job(browser: Browser, site: Site) -> None:
    visit = open_visit(browser, site, "write")
    page = visit.go("/jobs/hello")
    page.click("text=Trigger now")
    expect(page.locator(".flash")).to_contain_text("`admin` token")
    visit.context.close()


def test_csrf_and_missing_session_are_refused(admin: Visit, browser: Browser, site: Site) -> None:
    answer = admin.page.request.post(f"{site.url}/jobs/hello/pause", form={"csrf": "forged"})
    assert answer.status == 403
    stranger = browser.new_context()
    answer = stranger.request.post(f"{site.url}/jobs/hello/pause", form={"csrf": "x"})
    assert answer.status == 401
    stranger.close()
    assert site.api().get("/jobs/hello").json()["paused"] is False


def test_trigger_with_params_pause_and_resume(admin: Visit, site: Site) -> None:
    page = admin.go("/jobs/nightly")
    page.fill("#params", '{"region": "eu"}')
    page.click("text=Trigger now")
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f]+$"))
    expect(page.locator(".flash")).to_contain_text("Triggered nightly")
    expect(page.locator("main")).to_contain_text('{"region": "eu"}')
    admin.go("/jobs/nightly")
    page.click("button:text('Pause')")
    expect(page.locator("main h1")).to_contain_text("paused")
    assert site.api().get("/jobs/nightly").json()["paused"] is True
    page.click("button:text('Resume')")
    expect(page.locator("main h1")).not_to_contain_text("paused")
    audit = site.api().get("/audit", params={"token": "admin"}).json()["entries"]
    actions = [(e["source"], e["action"]) for e in audit]
    assert ("dashboard", "trigger") in actions and ("dashboard", "pause") in actions


def test_run_page_follows_state_and_log_then_cancels_the_running_task(
    admin: Visit, site: Site
) -> None:
    script = "for i in $(seq 1 300); do echo tick $i; sleep 0.2; done"
    job = {
        "name": "ticker",
        "schedule": {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"},
        "tasks": [
            {"name": "warmup", "kind": "shell", "argv": ["sleep", "1.5"]},
            {"name": "count", "kind": "shell", "argv": ["sh", "-c", script],
             "upstream": ["warmup"]},
        ],
    }  # fmt: skip
    assert site.api().post("/jobs", json=job).status_code == 201
    run_id = site.api().post("/jobs/ticker/trigger", json={}).json()["id"]
    page = admin.go(f"/runs/{run_id}?task=count")
    page.evaluate("window.__sameDocument = true")
    node = page.locator('svg.dag [data-task="count"]')
    expect(node).to_have_attribute("data-state", "running", timeout=15_000)
    expect(page.locator("#log-lines")).to_contain_text("tick 3", timeout=10_000)
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    admin.shot("run-live")
    page.locator('#tasks tr[data-task="count"] button:text("Cancel")').click()
    expect(page.locator(".flash")).to_contain_text("Cancel requested")
    expect(node).to_have_attribute("data-state", "cancelled", timeout=15_000)
    assert admin.errors == []


def test_bulk_retry_of_dead_letters(admin: Visit, site: Site) -> None:
    page = admin.go("/dead-letters")
    expect(page.locator("input[name=task_run_id]")).to_have_count(2)
    page.check("#select-all")
    page.click("text=Retry selected")
    expect(page.locator(".flash")).to_contain_text("Retried 2 dead letter(s)")
    retried = wait_for(
        lambda: site.api().get("/runs", params={"job": "broken-a"}).json()["runs"][0],
        lambda run: run["state"] in ("queued", "running", "failed"),
    )
    assert retried["state"] in ("queued", "running", "failed")
    entries = site.api().get("/audit").json()["entries"]
    assert any(e["action"] == "retry_dead_letters" for e in entries)


def test_filters_are_links_and_a_finished_run_is_marked_for_replay(
    admin: Visit, site: Site
) -> None:
    page = admin.go("/jobs")
    page.fill("input[name=queue]", "default")
    page.select_option("select[name=last]", "success")
    page.click("button:text('Filter')")
    expect(page).to_have_url(re.compile(r"/jobs\?.*queue=default.*last=success"))
    listed = page.locator("table.jobs tbody td:first-child a").all_inner_texts()
    assert "hello" in listed and "broken-a" not in listed
    hello = site.api().get("/runs", params={"job": "hello"}).json()["runs"][0]
    page = admin.go(f"/runs?trigger={hello['trigger']}&job=hello")
    expect(page.locator("select[name=trigger]")).to_have_value(hello["trigger"])
    page.click(f"a[href='/runs/{hello['id']}']")
    page.click("button:text('Mark for replay')")
    expect(page.locator(".flash")).to_contain_text("Marked for replay")
    replayed = wait_for(
        lambda: site.api().get(f"/runs/{hello['id']}").json(),
        lambda run: run["state"] == "success" and run["task_runs"][0]["attempt"] == 2,
    )
    assert len(replayed["attempts"]) == 2  # the first attempt stays in the history
    assert admin.errors == []
