"""The Django app in real processes: gunicorn and uWSGI masters and workers, ``manage.py``.

The project is ``tests/django_project`` (``cronlock.django`` in ``INSTALLED_APPS``, jobs
in ``ticks/jobs.py``, SQLite in the test's tmp dir), against a private Redis server. A
1 s interval job ``tick`` records every start and end per process (read with
``tests.history.History``).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Callable, Optional, Union

import pytest
import redis

pytest.importorskip("django")
pytest.importorskip("gunicorn")

from cronlock import Admin
from cronlock.testing import RedisServer, wait_until
from tests.django_project.harness import Gunicorn, Project
from tests.history import History
from tests.uwsgi_server import UwsgiServer

SLOTS = 6
TICK = "tick:1:0.05:5"


@pytest.fixture
def server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    return server_factory()


@pytest.fixture
def project(server: RedisServer, tmp_path: Path) -> Iterator[Project]:
    """The project with the 1 s ``tick`` job (no database: serving ticks needs none)."""
    p = Project(server.url, tmp_path, prefix=f"dj-{tmp_path.name}", jobs=TICK)
    try:
        yield p
    finally:
        p.close()


def _admin(project: Project, server: RedisServer) -> Admin:
    return Admin(redis.Redis.from_url(server.url), prefix=project.prefix)


def _run(
    project: Project,
    masters: Sequence[Union[Gunicorn, UwsgiServer]],
    during: Callable[[], None] = lambda: None,
    *,
    lead: float = 1.0,
) -> tuple[History, float, float]:
    """Serve until SLOTS + 1 slots of ``tick`` started ``lead`` full seconds on."""
    try:
        for master in masters:
            master.wait_serving()
        t0 = int(time.time()) + lead

        def enough() -> bool:
            during()
            starts = History.read(project.records).starts_by_slot("tick")
            return len([s for s in starts if s / 1000 >= t0]) >= SLOTS + 1

        wait_until(enough, timeout=60, interval=0.2)
    finally:
        stopped_at = time.time()
        statuses = [m.stop() for m in masters]
    assert statuses == [0] * len(masters), [m.output()[-2000:] for m in masters]
    return History.read(project.records), t0, stopped_at


def _each_slot_once(history: History, t0: float, stopped_at: float) -> list[int]:
    """Every 1 s slot of ``tick`` from t0 to a second before the stop: one start, one end."""
    starts = history.starts_by_slot("tick")
    done = history.completions_by_slot("tick")
    last = max(s for s in starts if s / 1000 + 1 <= stopped_at)
    window = list(range(int(t0 * 1000), last + 1, 1000))
    assert len(window) >= SLOTS
    missed = [s for s in window if s not in starts]
    twice = {s: starts[s] for s in window if len(starts.get(s, [])) > 1}
    assert missed == [], f"slots never run: {missed}"
    assert twice == {}, f"slots run more than once: {twice}"
    assert all(len(done.get(s, [])) == 1 for s in window), done
    return window


def _runner_pids(history: History, window: list[int]) -> set[int]:
    return {r["pid"] for r in history.events("start", "tick") if r["slot"] in window}


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--preload"]], ids=["no-preload", "preload"])
def test_gunicorn_three_workers_run_each_slot_once(
    project: Project, server: RedisServer, extra: list[str]
) -> None:
    """gunicorn -w 3 (with and without --preload): each slot once, in a worker, never the master.

    The hooks are cronlock.gunicorn's, unchanged; AUTOSTART is on (the default), so
    with --preload the master starts a runner at import and ``when_ready`` stops it.
    While it serves, ``manage.py cronlock status`` counts the three runners and
    ``manage.py cronlock runners --json`` names the three workers.
    """
    master = project.gunicorn(*extra, workers=3)
    admin = _admin(project, server)
    seen: list[set[int]] = []
    cli: dict[str, str] = {}

    def look() -> None:
        seen.append({r.pid for r in admin.runners()})
        if "status" not in cli and len(seen[-1]) == 3:
            cli["status"] = project.manage("cronlock", "status").stdout
            cli["runners"] = project.manage("cronlock", "runners", "--json").stdout

    history, t0, stopped_at = _run(project, [master], look)
    window = _each_slot_once(history, t0, stopped_at)
    workers = {r["pid"] for r in history.events("worker")}
    assert len(workers) == 3
    assert all(all(r["running"]) for r in history.events("worker"))
    assert _runner_pids(history, window) <= workers
    assert master.proc.pid not in _runner_pids(history, window)
    assert workers in seen, f"runners seen {seen[-3:]}, workers {workers}"
    assert "runners alive:    3" in cli["status"], cli
    assert {r["pid"] for r in json.loads(cli["runners"])} == workers


@pytest.mark.slow
def test_two_gunicorn_masters_share_the_slots(
    server: RedisServer, tmp_path: Path, project: Project
) -> None:
    """Two masters at once (two "hosts", -w 3 each, one with --preload): each slot once in all."""
    first = project.gunicorn(workers=3)
    second = project.gunicorn("--preload", workers=3)
    admin = _admin(project, server)
    seen: list[int] = []
    history, t0, stopped_at = _run(
        project, [first, second], lambda: seen.append(len(admin.runners()))
    )
    window = _each_slot_once(history, t0, stopped_at)
    workers = {r["pid"] for r in history.events("worker")}
    assert len(workers) == 6
    assert _runner_pids(history, window) <= workers
    assert 6 in seen, f"never saw six runners: {seen[-5:]}"


@pytest.mark.slow
def test_uwsgi_fork_mode_three_workers_run_each_slot_once(
    project: Project, server: RedisServer
) -> None:
    """pyuwsgi --master --processes 3 --enable-threads (fork mode): each slot once, in a worker.

    The master imports the project (no ``lazy-apps``), so ``ready()`` runs there;
    AUTOSTART is on, and the app hands the runner to ``cronlock.uwsgi.manage``, which
    starts it in each worker after the fork and never in the master: the three live
    runners are the three workers, and SIGINT stops the master with status 0.
    """
    master = project.uwsgi("--enable-threads")
    admin = _admin(project, server)
    seen: list[set[int]] = []
    # Two seconds on: a worker started just before a slot boundary runs the slot before
    # it as a catch-up and the next one is skipped as busy (test_uwsgi.py says more).
    history, t0, stopped_at = _run(
        project, [master], lambda: seen.append({r.pid for r in admin.runners()}), lead=2.0
    )
    window = _each_slot_once(history, t0, stopped_at)
    workers = {r["pid"] for r in history.events("worker")}
    assert len(workers) == 3
    assert {r["master"] for r in history.events("worker")} == {master.proc.pid}
    assert all(all(r["running"]) for r in history.events("worker"))
    assert master.proc.pid not in _runner_pids(history, window), "the uWSGI master ran a job"
    assert _runner_pids(history, window) <= workers
    assert workers in seen, f"runners seen {seen[-3:]}, workers {workers}"


@pytest.mark.slow
def test_migrate_and_shell_start_no_runner(project: Project, server: RedisServer) -> None:
    """``migrate`` (its data migration looks) and ``shell -c`` (for 2.5 s) run no job.

    The ``tick`` job is due every second, so a runner started there would have run it;
    ``migrate`` runs the project's data migration, which records the runner stopped
    and the reason.
    """
    migrate_run = project.manage("migrate", "-v0")
    assert migrate_run.returncode == 0, migrate_run.stderr
    shell = project.manage(
        "shell",
        "-c",
        "import json, time; time.sleep(2.5); from cronlock.django import runner; "
        "print(json.dumps([runner.running, runner.autostart]))",
    )
    assert shell.returncode == 0, shell.stderr
    running, (started, why) = json.loads(shell.stdout.strip().splitlines()[-1])
    assert (running, started) == (False, False)
    assert "'shell'" in why
    history = History.read(project.records)
    (migrate,) = history.events("migrate")
    assert migrate["running"] is False
    assert migrate["autostart"][0] is False
    assert "'migrate'" in migrate["autostart"][1]
    assert history.events("start") == []
    assert _admin(project, server).runners() == []


def test_handlers_close_old_connections_before_and_after(
    server: RedisServer, tmp_path: Path
) -> None:
    """In the runner's thread, a wrapped handler starts with no connection and leaves none.

    ``db-raw`` (registered without the wrapper) leaves its connection open in the one
    worker thread; ``db-touch`` then finds it closed when it starts (the close before the
    run), uses the ORM, and its connection is closed once it returns (the close after).
    """
    project = Project(server.url, tmp_path, prefix="dj-db", cronlock={"MAX_WORKERS": 1})
    try:
        assert project.manage("migrate", "-v0").returncode == 0
        done = project.manage("dbcheck")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
    finally:
        project.close()
    assert report == {
        "same_thread_wrapper": True,
        "raw_left_open": True,
        "open_at_start": False,
        "open_after_query": True,
        "closed_after": True,
    }


def test_jobs_py_registrations_and_manage_py_cronlock(server: RedisServer, tmp_path: Path) -> None:
    """Every registration call in ``ticks/jobs.py`` lands on the runner; the CLI gets the settings.

    ``manage.py cronlock jobs --json`` (no --redis-url, no --prefix) lists them once a
    process has registered them; ``manage.py cronlock run`` is not needed for that: the
    test registers them with ``runner.sync()`` from ``manage.py shell``.
    """
    project = Project(server.url, tmp_path, prefix="dj-cli", cronlock={"TIMEZONE": "Europe/Athens"})
    try:
        sync = project.manage(
            "shell", "-c", "from cronlock.django import runner; runner.runner.sync()"
        )
        assert sync.returncode == 0, sync.stderr
        listed = project.manage("cronlock", "jobs", "--json")
        assert listed.returncode == 0, listed.stderr
        unknown = project.manage("cronlock", "trigger", "no-such-job")
    finally:
        project.close()
    jobs = {j["key"]: j for j in json.loads(listed.stdout)}
    assert set(jobs) == {"nightly", "db-touch", "ticks.jobs.weekly_report"}
    assert "Europe/Athens" in jobs["nightly"]["schedule"]
    assert "0 6 * * 1" in jobs["ticks.jobs.weekly_report"]["schedule"]
    assert unknown.returncode != 0
    assert "no-such-job" in unknown.stderr


def test_an_unknown_cronlock_key_stops_manage_py_naming_it(tmp_path: Path) -> None:
    """``manage.py check`` with ``CRONLOCK = {..., "PREFX": ...}`` exits 1 naming 'PREFX'.

    (Every other bad setting: tests/unit/test_django_settings.py.)
    """
    project = Project("redis://127.0.0.1:1/0", tmp_path, prefix="dj-bad", cronlock={"PREFX": "x"})
    try:
        done = project.manage("check")
    finally:
        project.close()
    assert done.returncode == 1
    assert "SettingsError: settings.CRONLOCK has an unknown key 'PREFX'" in done.stderr


@pytest.mark.slow
def test_manage_py_cronlock_run_runs_the_project_runner(project: Project) -> None:
    """``manage.py cronlock run`` (no target) runs the jobs in the foreground; SIGTERM: exit 0."""
    proc = project.spawn([sys.executable, "manage.py", "cronlock", "run", "--stop-timeout", "5"])
    try:
        wait_until(lambda: len(History.read(project.records).events("start", "tick")) >= 2, 30)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        project.close()
    assert proc.returncode == 0, err
    assert "running" in out
    assert {r["pid"] for r in History.read(project.records).events("start", "tick")} == {proc.pid}


ACCESS = """
import json
from django.contrib.auth.models import Permission, User
from django.test import Client
User.objects.create_user("boss", password="x", is_staff=True)
clerk = User.objects.create_user("clerk", password="x")
clerk.user_permissions.add(Permission.objects.get(codename="view_user"))
seen = {"anonymous": Client().get("/cronlock/api/jobs").status_code}
for name in ("boss", "clerk"):
    client = Client()
    client.force_login(User.objects.get(username=name))
    seen[name] = client.get("/cronlock/api/jobs").status_code
print(json.dumps(seen))
"""


@pytest.mark.parametrize(
    ("permission", "expected"),
    [
        (None, {"anonymous": 403, "boss": 200, "clerk": 403}),
        ("auth.view_user", {"anonymous": 403, "boss": 403, "clerk": 200}),
    ],
    ids=["staff", "permission"],
)
def test_the_api_needs_staff_or_the_named_permission(
    server: RedisServer, tmp_path: Path, permission: Optional[str], expected: dict[str, int]
) -> None:
    """Default: staff only; with PERMISSION, the permission instead; anonymous: 403."""
    project = Project(server.url, tmp_path, prefix="dj-perm", cronlock={"PERMISSION": permission})
    try:
        assert project.manage("migrate", "-v0").returncode == 0
        done = project.manage("shell", "-c", ACCESS)
    finally:
        project.close()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected


SCHEDULES = """
import json
from django.contrib.auth.models import User
from django.test import Client
User.objects.create_user("boss", password="x", is_staff=True)
client = Client()  # the test client does not check CSRF unless asked: the body is what is tested
client.force_login(User.objects.get(username="boss"))
def post(body):
    r = client.post("/cronlock/api/schedules", json.dumps(body), content_type="application/json")
    return [r.status_code, json.loads(r.content)]
seen = {
    "unknown": post({"task": "reindex", "interval": 5, "colour": "red"}),
    "bad-task": post({"task": 7, "interval": 5}),
    "added": post({"task": "reindex", "interval": 60, "schedule_id": "ri"}),
}
listed = json.loads(client.get("/cronlock/api/schedules").content)["schedules"]
seen["listed"] = [s["id"] for s in listed]
print(json.dumps(seen))
"""


def test_the_schedules_api_reads_its_body_as_the_flask_one_does(
    server: RedisServer, tmp_path: Path
) -> None:
    """POST /cronlock/api/schedules: an unknown field or a bad task is a 400 naming it,
    nothing written; a good body is stored (201) and listed."""
    project = Project(server.url, tmp_path, prefix="dj-sched")
    try:
        assert project.manage("migrate", "-v0").returncode == 0
        done = project.manage("shell", "-c", SCHEDULES)
    finally:
        project.close()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["unknown"][0] == 400
    assert "'colour'" in seen["unknown"][1]["error"]
    assert seen["bad-task"][0] == 400
    assert "task must be a string" in seen["bad-task"][1]["error"]
    assert seen["added"][0] == 201
    assert seen["added"][1]["schedule"]["id"] == "ri"
    assert seen["listed"] == ["ri"]
