"""The Django dashboard in headless Chromium, behind Django's login, served by gunicorn.

A staff user logs in through ``django.contrib.auth``'s login view, sees the jobs, clicks
Pause and sees it paused (and Redis says so). A logged-in user who is not staff gets
403 from the page and the API; a POST without the CSRF token is refused even for staff.
Needs Chromium and Playwright as ``test_dashboard.py`` does (skipped locally without
them, a failure under ``CI=true``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import redis

pytest.importorskip("django")
pytest.importorskip("gunicorn")

from cronlock import Admin
from cronlock.testing import RedisServer, wait_until
from tests.django_project.harness import Gunicorn, Project
from tests.integration.test_dashboard import ARTIFACTS, _browser_or_skip, _launch

pytestmark = pytest.mark.slow

USERS = (
    "from django.contrib.auth.models import User; "
    "User.objects.create_user('boss', password='boss-pw-1', is_staff=True); "
    "User.objects.create_user('viewer', password='viewer-pw-1')"
)


@pytest.fixture
def served(server_factory: Callable[..., RedisServer], tmp_path: Path) -> Iterator[Any]:
    """gunicorn -w 1 --threads 4 serving the migrated project (two users); an Admin on it."""
    server = server_factory()
    project = Project(server.url, tmp_path, prefix="dj-dash")
    try:
        for args in (("migrate", "-v0"), ("shell", "-c", USERS)):
            done = project.manage(*args)
            assert done.returncode == 0, done.stderr
        # Threads: Chromium holds idle preconnected sockets, which block a sync worker.
        master: Gunicorn = project.gunicorn("--threads", "4", workers=1)
        master.wait_serving()
        admin = Admin(redis.Redis.from_url(server.url), prefix="dj-dash")
        wait_until(admin.runners, timeout=20)  # the worker's runner registered
        yield master, admin
        assert master.stop() == 0, master.output()[-2000:]
    finally:
        project.close()


def _log_in(page: Any, base: str, user: str, password: str) -> Any:
    """Go to the dashboard, get sent to the login page, log in; the final response."""
    page.goto(base + "/cronlock/", wait_until="load")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    with page.expect_navigation() as navigation:
        page.click("#login")
    return navigation.value


def test_staff_pause_click_pauses_and_others_get_403(served: Any, tmp_path: Path) -> None:
    """Login -> dashboard -> Pause pauses the job; a non-staff user and a CSRF-less POST get 403."""
    sync_playwright = _browser_or_skip()
    master, admin = served
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        context = _launch(p, tmp_path)
        try:
            page = context.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            response = _log_in(page, master.base, "boss", "boss-pw-1")
            assert response.status == 200
            assert page.url.endswith("/cronlock/")
            keys = {
                page.locator("#jobs tbody tr").nth(i).get_attribute("data-key")
                for i in range(page.locator("#jobs tbody tr").count())
            }
            assert {"nightly", "db-touch"} <= keys
            row = page.locator('#jobs tr[data-key="nightly"]')
            assert row.locator(".state").inner_text().strip() == "active"
            row.locator('button[data-action="pause"]').click()
            page.wait_for_selector('#jobs tr[data-key="nightly"] .badge.paused', timeout=15000)
            assert admin.job("nightly").paused
            page.screenshot(path=str(ARTIFACTS / "django-dashboard.png"), full_page=True)

            # Logged in as staff, but no CSRF token: Django refuses the action.
            refused = page.request.post(
                master.base + "/cronlock/api/jobs/nightly/resume",
                data="{}",
                headers={"Content-Type": "application/json"},
            )
            assert refused.status == 403
            assert admin.job("nightly").paused
        finally:
            context.close()

        other = _launch(p, tmp_path / "viewer")
        try:
            page = other.new_page()
            response = _log_in(page, master.base, "viewer", "viewer-pw-1")
            assert response.status == 403
            api = page.request.get(master.base + "/cronlock/api/jobs")
            assert api.status == 403
            assert "not authorized" in api.json()["error"]
        finally:
            other.close()
    assert errors == []
