"""The management blueprint's JSON API, through Flask's test client, against a real Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable

import pytest
import redis

from cronlock import Admin, JobContext
from cronlock.testing import RedisServer, wait_until

flask = pytest.importorskip("flask")

from cronlock.flask import ACTIONS, CronLock, management_blueprint  # noqa: E402

NOW = 1_700_000_000.0
TOKEN = "s3cret-token"


class Setup:
    def __init__(self, url: str, *, authorize: Any = None, token: Any = None) -> None:
        self.ext = CronLock()
        self.ran: list[Any] = []

        @self.ext.interval(seconds=60, key="report")
        def report() -> None:
            self.ran.append(flask.current_app.name)

        @self.ext.interval(seconds=60, key="broken")
        def broken() -> None:
            raise RuntimeError("the report server is down")

        @self.ext.task("reindex")
        def reindex(ctx: JobContext) -> None:
            self.ran.append(("reindex", ctx.payload, flask.current_app.name))

        self.app = flask.Flask("apiapp")
        self.app.config.update(
            CRONLOCK_REDIS_URL=url, CRONLOCK_PREFIX="api-test", CRONLOCK_API_TOKEN=token
        )
        self.ext.init_app(self.app)
        self.app.register_blueprint(self.ext.blueprint(authorize=authorize))
        self.http = self.app.test_client()
        self.runner = self.ext.runner_for(self.app)
        self.admin = Admin(self.runner.client, "api-test")
        self.runner.sync()  # registers the jobs in Redis, as a started runner does

    def post(self, path: str, json: Any = None, **kwargs: Any) -> Any:
        return self.http.post(f"/cronlock/api{path}", json={} if json is None else json, **kwargs)


@pytest.fixture
def make_setup() -> Iterator[Callable[..., Setup]]:
    """Build Setups; every one's runner is stopped when the test ends (before any server
    it talks to is stopped), started or not, whatever the test did."""
    made: list[Setup] = []

    def make(url: str, **kwargs: Any) -> Setup:
        made.append(Setup(url, **kwargs))
        return made[-1]

    yield make
    for s in made:
        s.runner.stop(timeout=5)


@pytest.fixture
def setup(redis_url: str, make_setup: Callable[..., Setup]) -> Setup:
    return make_setup(redis_url, authorize=lambda action: True)


def test_jobs_list_shows_next_and_last_run(setup: Setup) -> None:
    """GET /api/jobs lists every registered job with its status, next run and last outcome."""
    assert setup.runner.run_pending(NOW) == 2
    body = setup.http.get("/cronlock/api/jobs").get_json()
    jobs = {j["key"]: j for j in body["jobs"]}
    assert set(jobs) == {"broken", "report"}
    assert jobs["report"]["status"] == "done"
    assert jobs["report"]["next_run"]
    assert jobs["broken"]["status"] == "failed"
    assert jobs["broken"]["consecutive_failures"] == 1


def test_job_detail_has_its_history(setup: Setup) -> None:
    """GET /api/jobs/<key> returns the job and its history; a failure carries its traceback."""
    setup.runner.run_pending(NOW)
    body = setup.http.get("/cronlock/api/jobs/broken?limit=5").get_json()
    assert body["job"]["key"] == "broken"
    events = [h["event"] for h in body["history"]]
    assert events[0] == "failed"
    assert "the report server is down" in body["history"][0]["traceback"]
    assert setup.http.get("/cronlock/api/jobs/nope").status_code == 404
    assert setup.http.get("/cronlock/api/jobs/report?limit=0").status_code == 400
    assert setup.http.get("/cronlock/api/jobs/report?limit=x").status_code == 400


def test_pause_and_resume_reach_every_replica(setup: Setup) -> None:
    """POST pause makes the runner skip the job; resume lets it run again."""
    response = setup.post("/jobs/report/pause")
    assert response.status_code == 200
    assert setup.admin.job("report").paused
    setup.runner.run_pending(NOW)
    assert setup.ran == []
    assert setup.post("/jobs/report/resume").status_code == 200
    assert not setup.admin.job("report").paused
    setup.runner.run_pending(NOW + 60)
    assert setup.ran == ["apiapp"]


def test_trigger_runs_the_job_once_now(setup: Setup) -> None:
    """POST trigger answers 202 with a request id; the runner runs it as a manual slot."""
    response = setup.post("/jobs/report/trigger", {"force": True})
    assert response.status_code == 202
    request_id = response.get_json()["request_id"]
    setup.runner.sync()
    wait_until(lambda: setup.ran == ["apiapp"], timeout=10)
    manual = [h for h in setup.admin.history("report") if h.kind == "manual"]
    assert any(h.trigger_id == request_id for h in manual)
    assert setup.post("/jobs/report/trigger", {"force": "yes"}).status_code == 400
    assert setup.post("/jobs/ghost/trigger").status_code == 404


def test_dynamic_schedules_add_list_remove(setup: Setup) -> None:
    """POST /api/schedules stores one (201); the runner runs its task; DELETE removes it."""
    response = setup.post(
        "/schedules",
        {"task": "reindex", "interval": 60, "payload": {"index": "users"}, "schedule_id": "ri"},
    )
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["schedule"]["id"] == "ri"
    listed = setup.http.get("/cronlock/api/schedules").get_json()["schedules"]
    assert [s["id"] for s in listed] == ["ri"]
    setup.runner.sync()
    setup.runner.run_pending(NOW)
    assert ("reindex", {"index": "users"}, "apiapp") in setup.ran
    assert setup.http.delete("/cronlock/api/schedules/ri").status_code == 200
    assert setup.http.delete("/cronlock/api/schedules/ri").status_code == 404
    assert setup.admin.list_schedules() == []


def test_invalid_input_is_a_400_with_the_python_message(setup: Setup) -> None:
    """Bad schedules answer 400 with the same message Admin.add_schedule raises."""
    bad_cron = setup.post("/schedules", {"task": "reindex", "cron": "61 * * * *"})
    assert bad_cron.status_code == 400
    with pytest.raises(ValueError, match="61") as raised:
        setup.admin.add_schedule("reindex", cron="61 * * * *", schedule_id="x")
    assert bad_cron.get_json()["error"].split(";")[0] in str(raised.value)
    both = setup.post("/schedules", {"task": "reindex", "cron": "* * * * *", "interval": 5})
    assert both.status_code == 400
    unknown = setup.post("/schedules", {"task": "reindex", "interval": 5, "colour": "red"})
    assert unknown.status_code == 400
    assert "colour" in unknown.get_json()["error"]
    assert setup.post("/schedules", {"interval": 5}).status_code == 400


def test_bodies_must_be_json(setup: Setup) -> None:
    """A form post is a 415, broken JSON a 400, a JSON array a 400: nothing changes."""
    form = setup.http.post("/cronlock/api/jobs/report/pause", data={"a": "b"})
    assert form.status_code == 415
    broken = setup.http.post(
        "/cronlock/api/jobs/report/pause", data="{", content_type="application/json"
    )
    assert broken.status_code == 400
    assert setup.post("/jobs/report/pause", json=[1]).status_code == 400
    assert not setup.admin.job("report").paused


def test_get_never_mutates(setup: Setup) -> None:
    """GET on a mutating URL is a 405 and changes nothing."""
    response = setup.http.get("/cronlock/api/jobs/report/pause")
    assert response.status_code in (404, 405)
    assert "error" in response.get_json()
    assert not setup.admin.job("report").paused


def test_mutations_are_refused_by_default(redis_url: str, make_setup: Callable[..., Setup]) -> None:
    """Without authorize= or CRONLOCK_API_TOKEN, reads work and every mutation is a 403."""
    s = make_setup(redis_url)
    assert s.http.get("/cronlock/api/jobs").status_code == 200
    for path in ("/jobs/report/pause", "/jobs/report/resume", "/jobs/report/trigger"):
        response = s.post(path)
        assert response.status_code == 403
        assert "CRONLOCK_API_TOKEN" in response.get_json()["error"]
    assert s.post("/schedules", {"task": "reindex", "interval": 5}).status_code == 403
    assert s.http.delete("/cronlock/api/schedules/x").status_code == 403
    assert not s.admin.job("report").paused
    assert s.admin.list_schedules() == []


def test_bearer_token_from_config(redis_url: str, make_setup: Callable[..., Setup]) -> None:
    """CRONLOCK_API_TOKEN: no or a wrong token is a 401; the right bearer token is allowed."""
    s = make_setup(redis_url, token=TOKEN)
    assert s.post("/jobs/report/pause").status_code == 401
    wrong = s.post("/jobs/report/pause", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.headers["WWW-Authenticate"].startswith("Bearer")
    assert not s.admin.job("report").paused
    ok = s.post("/jobs/report/pause", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert s.admin.job("report").paused
    assert s.http.get("/cronlock/api/auth").get_json() == {"authorized": False}
    authed = s.http.get("/cronlock/api/auth", headers={"Authorization": f"Bearer {TOKEN}"})
    assert authed.get_json() == {"authorized": True}


def test_authorize_hook_sees_each_action(redis_url: str, make_setup: Callable[..., Setup]) -> None:
    """authorize(action) is asked per endpoint; False on read hides the API too."""
    asked: list[str] = []

    def authorize(action: str) -> bool:
        asked.append(action)
        return flask.request.headers.get("X-Role") == "admin"

    s = make_setup(redis_url, authorize=authorize)
    assert s.http.get("/cronlock/api/jobs").status_code == 403
    assert s.post("/jobs/report/pause").status_code == 403
    admin = {"X-Role": "admin"}
    assert s.http.get("/cronlock/api/jobs", headers=admin).status_code == 200
    assert s.post("/jobs/report/pause", headers=admin).status_code == 200
    assert set(asked) <= set(ACTIONS)
    assert {"read", "pause"} <= set(asked)


def test_health_is_200_when_running_and_503_otherwise(
    server_factory: Callable[..., RedisServer], make_setup: Callable[..., Setup]
) -> None:
    """/health: 503 before start, 200 with the runner started, 503 when Redis is gone."""
    server = server_factory()
    s = make_setup(server.url, authorize=lambda action: True)
    s.runner.client = redis.Redis.from_url(server.url, socket_timeout=1)
    assert s.http.get("/cronlock/health").status_code == 503
    s.ext.start(s.app)
    try:
        wait_until(lambda: s.http.get("/cronlock/health").status_code == 200, timeout=15)
        report = s.http.get("/cronlock/health").get_json()
        assert report["redis"] is True
        server.stop()
        response = s.http.get("/cronlock/health")
        assert response.status_code == 503
        assert response.get_json()["redis"] is False
        assert s.http.get("/cronlock/api/jobs").status_code == 503
    finally:
        s.runner.stop(timeout=5)


def test_blueprint_over_an_admin_alone(redis_url: str, make_setup: Callable[..., Setup]) -> None:
    """management_blueprint(Admin(...)) serves the same API without a local runner."""
    s = make_setup(redis_url)
    app = flask.Flask("ops")
    app.config["CRONLOCK_API_TOKEN"] = TOKEN
    app.register_blueprint(management_blueprint(s.admin, url_prefix="/ops"))
    http = app.test_client()
    keys = [j["key"] for j in http.get("/ops/api/jobs").get_json()["jobs"]]
    assert keys == ["broken", "report"]
    assert http.get("/ops/health").status_code == 200
    response = http.post(
        "/ops/api/jobs/report/pause", json={}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 200
    assert s.admin.job("report").paused
