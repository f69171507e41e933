"""The Flask extension on any store: ``CRONLOCK_STORE_URL`` (and its older name), the
blueprint and ``/health`` through the store, on a SQLite file and a private Redis."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flask
import pytest

from cronlock import Admin, ConfigurationError
from cronlock.flask import CronLock, management_blueprint
from cronlock.stores import RedisStore, SqliteStore

NOW = 1_700_000_000.0
PREFIX = "flask-stores"


def make_app(**config: Any) -> tuple[flask.Flask, CronLock]:
    ext = CronLock()
    ran: list[float] = []

    @ext.interval(seconds=60, key="report")
    def report() -> None:
        ran.append(NOW)

    app = flask.Flask("storeapp")
    app.config.update(CRONLOCK_PREFIX=PREFIX, **config)
    ext.init_app(app)
    app.register_blueprint(ext.blueprint(authorize=lambda action: True))
    return app, ext


@pytest.fixture
def sqlite_app(tmp_path: Path) -> Iterator[tuple[flask.Flask, CronLock, Path]]:
    path = tmp_path / "jobs.db"
    app, ext = make_app(
        CRONLOCK_STORE_URL=f"sqlite:///{path}", CRONLOCK_STORE_OPTIONS={"busy_timeout": 0.2}
    )
    yield app, ext, path
    ext.runner_for(app).stop(timeout=5)


def test_a_sqlite_store_url_runs_the_jobs_and_serves_the_api(
    sqlite_app: tuple[flask.Flask, CronLock, Path],
) -> None:
    """CRONLOCK_STORE_URL=sqlite:///...: the runner's store is that file; the API lists
    the job, runs it and pauses it through the same store."""
    app, ext, path = sqlite_app
    runner = ext.runner_for(app)
    assert isinstance(runner.store, SqliteStore)
    assert runner.store.path == str(path)
    runner.sync()
    assert runner.run_pending(NOW) == 1
    http = app.test_client()
    [job] = http.get("/cronlock/api/jobs").get_json()["jobs"]
    assert (job["key"], job["status"]) == ("report", "done")
    assert http.post("/cronlock/api/jobs/report/pause", json={}).status_code == 200
    assert Admin(SqliteStore(path, PREFIX)).job("report").paused


def test_health_of_a_started_runner_reports_the_store(
    sqlite_app: tuple[flask.Flask, CronLock, Path],
) -> None:
    """/health carries store / store_latency_ms and, for compatibility, the same values
    as redis / redis_latency_ms."""
    app, ext, _ = sqlite_app
    ext.start(app)
    report = app.test_client().get("/cronlock/health").get_json()
    assert report["store"] is True, report  # the report's problems say why not
    assert report["store_latency_ms"] >= 0
    assert report["redis"] is True
    assert report["redis_latency_ms"] == report["store_latency_ms"]
    assert report["store_kind"].startswith("SqliteStore(")


def test_a_store_that_cannot_answer_is_a_503_naming_it(
    sqlite_app: tuple[flask.Flask, CronLock, Path],
) -> None:
    """A write the SQLite file refuses (another process holds its lock past the busy
    timeout) answers 503 with the store's error, not a 500."""
    app, ext, path = sqlite_app
    ext.runner_for(app).sync()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        response = app.test_client().post("/cronlock/api/jobs/report/pause", json={})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert response.status_code == 503
    assert "the store is unavailable: OperationalError" in response.get_json()["error"]


def test_an_admin_alone_reports_its_store(tmp_path: Path) -> None:
    """management_blueprint(Admin(store)): /health pings the store and says so."""
    app = flask.Flask("adminonly")
    admin = Admin(SqliteStore(tmp_path / "a.db", PREFIX))
    app.register_blueprint(management_blueprint(admin))
    response = app.test_client().get("/cronlock/health")
    assert response.status_code == 200
    report = response.get_json()
    assert (report["ok"], report["store"], report["redis"]) == (True, True, True)
    assert report["store_latency_ms"] == report["redis_latency_ms"] >= 0


def test_the_older_redis_url_name_still_works(redis_url: str) -> None:
    """CRONLOCK_REDIS_URL alone, or equal to CRONLOCK_STORE_URL, builds a RedisStore."""
    for config in (
        {"CRONLOCK_REDIS_URL": redis_url},
        {"CRONLOCK_REDIS_URL": redis_url, "CRONLOCK_STORE_URL": redis_url},
        {"CRONLOCK_STORE_URL": redis_url},
    ):
        app, ext = make_app(**config)
        store = ext.runner_for(app).store
        assert isinstance(store, RedisStore)
        assert store.client.connection_pool.connection_kwargs["socket_timeout"] == 10


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (
            {"CRONLOCK_STORE_URL": "redis://a:1/0", "CRONLOCK_REDIS_URL": "redis://u:secret@b:1"},
            r"CRONLOCK_STORE_URL \('redis://a:1/0'\) and CRONLOCK_REDIS_URL "
            r"\('redis://\*\*\*@b:1'\) differ",
        ),
        ({"CRONLOCK_REDIS_URL": "sqlite:///x.db"}, "takes a Redis URL.*CRONLOCK_STORE_URL"),
        ({"CRONLOCK_STORE_URL": "sqlite:////no/such/dir/x.db"}, "'/no/such/dir' does not exist"),
        ({"CRONLOCK_STORE_URL": "mysql://u:secret@h/d"}, "got 'mysql://\\*\\*\\*@h/d'"),
        ({"CRONLOCK_STORE_URL": 6379}, "must be a URL string; got 6379"),
    ],
)
def test_bad_store_configuration_fails_at_init_app(config: dict[str, Any], match: str) -> None:
    """Each mistake is a ConfigurationError naming the value (passwords masked)."""
    with pytest.raises(ConfigurationError, match=match) as error:
        make_app(**config)
    assert "secret" not in str(error.value)


def test_a_redis_runners_health_names_its_store(redis_url: str) -> None:
    """On Redis, too, the store fields and their older names carry the same answer."""
    app, ext = make_app(CRONLOCK_STORE_URL=redis_url)
    report = ext.runner_for(app).health()
    assert report.store is report.redis is True
    assert report.store_latency_ms == report.redis_latency_ms
    assert report.store_kind == f"RedisStore(prefix={PREFIX!r})"
