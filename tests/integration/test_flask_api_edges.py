"""What the management API says at the operator's edges (issue: operator edges, C7, C8).

A trigger of a paused job is a 409; a trigger or schedule no live runner can take
carries a warning; a pause of a key no runner has is a 409 unless forced; removed
schedules leave the job list. Flask's test client, a real Redis.
"""

from __future__ import annotations

from typing import Callable

import pytest

from cronlock.testing import wait_until
from tests.integration.test_flask_api import Setup, make_setup

__all__ = ["make_setup"]  # the fixture, shared with test_flask_api

pytest.importorskip("flask")


@pytest.fixture
def s(redis_url: str, make_setup: Callable[..., Setup]) -> Setup:
    return make_setup(redis_url, authorize=lambda action: True)


def test_a_trigger_of_a_paused_job_is_a_409_and_queues_nothing(s: Setup) -> None:
    """409 naming the job and force; {"force": true} is accepted (202)."""
    s.admin.pause("report")
    response = s.post("/jobs/report/trigger")
    assert response.status_code == 409
    assert "'report' is paused" in response.get_json()["error"]
    assert '"force": true' in response.get_json()["error"]
    assert s.admin.job("report").pending_triggers == 0
    assert s.post("/jobs/report/trigger", json={"force": True}).status_code == 202
    assert s.admin.job("report").pending_triggers == 1


def test_a_trigger_says_when_no_live_runner_has_the_job(s: Setup) -> None:
    """runners 0 and a warning while no runner runs; none once one has started."""
    body = s.post("/jobs/report/trigger", json={"expires": 30}).get_json()
    assert (body["runners"], body["expires_in"]) == (0, 30)
    assert "no live runner has job 'report'" in body["warning"]
    s.ext.start(s.app)
    try:
        wait_until(lambda: s.admin.runners_with("report") == 1, timeout=15)
        body = s.post("/jobs/report/trigger").get_json()
        assert body["runners"] == 1
        assert "warning" not in body
    finally:
        s.runner.stop(timeout=5)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expires": 0}, "expires"),
        ({"expires": "10m"}, "expires"),
        ({"expires": 1e308}, "expires"),  # finite seconds, infinite milliseconds
        ({"force": "yes"}, "force"),
        ({"forse": True}, "forse"),
    ],
)
def test_a_bad_trigger_body_is_a_400_naming_the_field(
    s: Setup, body: dict[str, object], field: str
) -> None:
    """400, the field named, nothing queued."""
    response = s.post("/jobs/report/trigger", json=body)
    assert response.status_code == 400
    assert field in response.get_json()["error"]
    assert s.admin.job("report").pending_triggers == 0


def test_a_pause_of_a_key_no_runner_has_is_a_409_unless_forced(s: Setup) -> None:
    """A typo pauses nothing silently: 409; {"force": true} pauses it."""
    response = s.post("/jobs/reprot/pause")
    assert response.status_code == 409
    assert "'reprot'" in response.get_json()["error"]
    with pytest.raises(KeyError):
        s.admin.job("reprot")
    assert s.post("/jobs/reprot/pause", json={"force": True}).status_code == 200
    assert s.admin.job("reprot").paused


def test_a_schedule_for_a_task_no_live_runner_has_carries_a_warning(s: Setup) -> None:
    """201 either way; the warning names the task while no live runner handles it."""
    body = s.post("/schedules", json={"task": "nobody", "interval": 60}).get_json()
    assert "task 'nobody'" in body["warning"]
    s.ext.start(s.app)
    try:
        wait_until(lambda: any("reindex" in r.tasks for r in s.admin.runners()), timeout=15)
        response = s.post("/schedules", json={"task": "reindex", "interval": 60})
        assert response.status_code == 201
        assert "warning" not in response.get_json()
    finally:
        s.runner.stop(timeout=5)


def test_a_removed_schedule_leaves_the_job_list(s: Setup) -> None:
    """Its job was registered by a runner; once removed, /api/jobs no longer lists it."""
    schedule = s.post("/schedules", json={"task": "reindex", "interval": 60}).get_json()
    sid = schedule["schedule"]["id"]
    s.runner.sync()  # the runner picks the schedule up and registers its job
    assert sid in {j["key"] for j in s.http.get("/cronlock/api/jobs").get_json()["jobs"]}
    assert s.http.delete(f"/cronlock/api/schedules/{sid}").status_code == 200
    listed = {j["key"] for j in s.http.get("/cronlock/api/jobs").get_json()["jobs"]}
    assert listed == {"broken", "report"}


def test_the_dashboard_marks_jobs_no_live_runner_has(s: Setup) -> None:
    """No runner started: each job carries a "no runner" badge."""
    page = s.http.get("/cronlock/").get_data(as_text=True)
    assert page.count('class="badge stale"') == 2


def test_the_dashboard_names_health_warnings_and_unhandled_schedules(s: Setup) -> None:
    """A schedule no live runner handles gets a "no handler" badge; health warnings are
    counted in the badge, not hidden behind "healthy"."""
    s.post("/schedules", json={"task": "nobody", "interval": 60})
    s.ext.start(s.app)
    try:
        wait_until(lambda: s.http.get("/cronlock/health").status_code == 200, timeout=15)
        s.runner.sync()  # picks the schedule up: its task has no handler here
        page = s.http.get("/cronlock/").get_data(as_text=True)
    finally:
        s.runner.stop(timeout=5)
    assert ">no handler<" in page
    assert "healthy, 1 warning(s)" in page
    assert "names task &#39;nobody&#39;, which has no handler here" in page
