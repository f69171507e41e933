"""The dashboard in a real headless Chromium: see the jobs, click Pause, see the state change.

Needs Debian's ``chromium`` (``/usr/bin/chromium``, or ``$CRONLOCK_CHROMIUM``) and the
Python ``playwright`` package, which drives it (``playwright install`` is never run).
Without them the test is skipped with a loud reason, except under ``CI=true``, where it
fails: CI must install them (see ``.ci/run``). Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from cronlock import Admin
from cronlock.testing import wait_until
from tests.history import ROOT

flask = pytest.importorskip("flask")

from werkzeug.serving import make_server  # noqa: E402

from cronlock.flask import CronLock  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("CRONLOCK_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOW = 1_700_000_000.0


def _browser_or_skip() -> Any:
    """Playwright's sync API, or skip (locally) / fail (CI) naming what is missing."""
    missing = []
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("the Python package 'playwright' (pip install playwright)")
        sync_playwright = None
    if not Path(CHROMIUM).exists():
        missing.append(f"Chromium at {CHROMIUM} (apt-get install -y chromium chromium-driver)")
    if missing:
        reason = "DASHBOARD BROWSER TEST NOT RUN: missing " + " and ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " -- CI must install them", pytrace=False)
        pytest.skip(reason)
    return sync_playwright


class Served:
    """The example-like app, served by Werkzeug on a free port in a thread."""

    def __init__(self, url: str, *, token: Optional[str] = None) -> None:
        ext = CronLock()

        @ext.interval(seconds=60, key="send-digest")
        def send_digest() -> None: ...

        @ext.cron("0 3 * * *", key="nightly-cleanup")
        def nightly_cleanup() -> None: ...

        @ext.interval(seconds=60, key="sync-invoices")
        def sync_invoices() -> None:
            raise ConnectionError("billing API answered 502")

        self.app = flask.Flask("dashboard-test")
        self.app.config.update(
            CRONLOCK_REDIS_URL=url, CRONLOCK_PREFIX="dash-test", CRONLOCK_API_TOKEN=token
        )
        ext.init_app(self.app)
        authorize = None if token else (lambda action: True)
        self.app.register_blueprint(ext.blueprint(authorize=authorize, title="shop"))
        self.runner = ext.runner_for(self.app)
        self.admin = Admin(self.runner.client, "dash-test")
        self.runner.start()  # registers the jobs and sends heartbeats: "runners alive"
        try:
            self.runner.run_pending(NOW)  # one run of each interval job: history to show
            self.server = make_server("127.0.0.1", 0, self.app, threaded=True)
            self.base = f"http://127.0.0.1:{self.server.server_port}"
            self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
            self.thread.start()
        except BaseException:
            self.runner.stop(timeout=5)
            raise

    def close(self) -> None:
        try:
            self.server.shutdown()
        finally:
            self.runner.stop(timeout=5)  # before the fixture's server is stopped


@pytest.fixture
def served(redis_url: str) -> Iterator[Served]:
    s = Served(redis_url)
    yield s
    s.close()


def _launch(p: Any, tmp_path: Path) -> Any:
    return p.chromium.launch_persistent_context(
        str(tmp_path / "profile"),  # a fresh profile for every test
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1200, "height": 900},
    )


def test_dashboard_shows_jobs_and_pause_changes_state(served: Served, tmp_path: Path) -> None:
    """Chromium loads the dashboard offline, sees 3 jobs and the failure, clicks Pause, sees it."""
    sync_playwright = _browser_or_skip()
    ARTIFACTS.mkdir(exist_ok=True)
    requests: list[str] = []
    errors: list[str] = []
    with sync_playwright() as p:
        context = _launch(p, tmp_path)
        try:
            page = context.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(served.base + "/cronlock/", wait_until="load")

            rows = page.locator("#jobs tbody tr")
            assert rows.count() == 3
            keys = sorted(rows.nth(i).get_attribute("data-key") or "" for i in range(3))
            assert keys == ["nightly-cleanup", "send-digest", "sync-invoices"]
            # the newest failed run is open (a minute boundary crossed meanwhile adds another)
            newest = page.locator("#history details[open]").first
            assert "billing API answered 502" in newest.inner_text()
            assert page.locator("#runners tbody tr").count() >= 1

            row = page.locator('#jobs tr[data-key="send-digest"]')
            assert row.locator(".state").inner_text().strip() == "active"
            row.locator('button[data-action="pause"]').click()
            page.wait_for_selector('#jobs tr[data-key="send-digest"] .badge.paused', timeout=15000)
            row = page.locator('#jobs tr[data-key="send-digest"]')
            assert row.locator(".state").inner_text().strip() == "paused"
            assert row.locator('button[data-action="resume"]').is_visible()
            assert served.admin.job("send-digest").paused
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)

            phone = context.new_page()
            phone.set_viewport_size({"width": 390, "height": 844})
            phone.goto(served.base + "/cronlock/", wait_until="load")
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"the page scrolls sideways on a phone ({width} px)"
            phone.screenshot(path=str(ARTIFACTS / "dashboard-phone.png"), full_page=True)
        finally:
            context.close()
    outside = [u for u in requests if not u.startswith(served.base)]
    assert outside == [], f"the page fetched from elsewhere: {outside}"
    assert errors == []


def test_token_unlocks_the_buttons_and_run_now_runs_the_job(redis_url: str, tmp_path: Path) -> None:
    """With only CRONLOCK_API_TOKEN: buttons hidden until the token is entered; Run now runs."""
    sync_playwright = _browser_or_skip()
    ARTIFACTS.mkdir(exist_ok=True)
    served = Served(redis_url, token="open-sesame")
    try:
        with sync_playwright() as p:
            context = _launch(p, tmp_path)
            try:
                page = context.new_page()
                page.goto(served.base + "/cronlock/", wait_until="load")
                run_now = page.locator('#jobs tr[data-key="send-digest"] [data-action="trigger"]')
                assert not run_now.is_visible()
                page.fill("#token", "wrong")
                page.click("#token-form button")
                page.wait_for_selector("#message.error", timeout=15000)
                assert not run_now.is_visible()
                page.fill("#token", "open-sesame")
                page.click("#token-form button")
                run_now.wait_for(state="visible", timeout=15000)
                assert not page.locator("#token-form").is_visible()
                run_now.click()
                page.wait_for_selector("text=Run of send-digest requested", timeout=15000)

                def manual_run_recorded() -> bool:
                    history = served.admin.history("send-digest", 20)
                    return any(h.kind == "manual" and h.event == "succeeded" for h in history)

                wait_until(manual_run_recorded, timeout=20)
                page.screenshot(path=str(ARTIFACTS / "dashboard-token.png"), full_page=True)
            finally:
                context.close()
    finally:
        served.close()


def test_dashboard_without_authorization_hides_the_buttons(redis_url: str) -> None:
    """Without authorize= or a token the page renders read-only (actions hidden)."""
    ext = CronLock()
    ext.interval(seconds=60, key="only")(lambda: None)
    app = flask.Flask("readonly")
    app.config.update(CRONLOCK_REDIS_URL=redis_url, CRONLOCK_PREFIX="dash-ro")
    ext.init_app(app)
    app.register_blueprint(ext.blueprint())
    ext.runner.sync()
    html = app.test_client().get("/cronlock/").get_data(as_text=True)
    assert 'data-authorized="false"' in html
    assert 'data-key="only"' in html
    assert "https://" not in html
    assert "http://" not in html
