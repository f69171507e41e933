"""Real uWSGI masters and workers serving the Flask test app with cronlock: one run per slot.

Two builds, where installed (``tests/uwsgi_server.py`` finds them, starts and stops the
masters): the ``pyuwsgi`` wheel (Python threads run without ``enable-threads``) and
Debian's ``uwsgi-core`` with its ``python3`` plugin (they do not). Each case starts
``--master --processes 3`` on ``tests/gunicorn_app/uwsgi_app.py`` (the app of the
gunicorn tests, autostart on) against a private Redis server, lets a 1 s interval job
run for a few slots, stops uWSGI, and checks the start/end records every process
appended to its own file. (The Django project under uWSGI: ``test_django.py``.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Optional

import pytest
import redis

from cronlock import Admin
from cronlock.testing import RedisServer, wait_until
from tests.history import ROOT, History
from tests.integration.test_gunicorn import (
    _assert_each_slot_once,
    _assert_recycled_runs_handed_over,
    _slots_since,
)
from tests.uwsgi_server import UwsgiServer

pytest.importorskip("flask")

pytestmark = pytest.mark.slow

SLOTS = 6
APP = "tests.gunicorn_app.uwsgi_app:app"
BUILDS = [pytest.param("pyuwsgi", id="pyuwsgi"), pytest.param("debian", id="debian")]


class Uwsgi(UwsgiServer):
    """One uWSGI master (and its workers) serving the test app."""

    def __init__(  # noqa: PLR0917 - one call site per test, every argument named there
        self, build: str, redis_url: str, record_dir: Path, jobs: str, extra: list[str], prefix: str
    ) -> None:
        env = {
            **os.environ,
            "GT_REDIS_URL": redis_url,
            "GT_RECORD_DIR": str(record_dir),
            "GT_JOBS": jobs,
            "GT_PREFIX": prefix,
            "GT_AUTOSTART": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
        }
        options = ["--processes", "3", "--need-app", "--pythonpath", str(ROOT), "--module", APP]
        options += ["--worker-reload-mercy", "10", "--disable-logging", *extra]
        super().__init__(build, options, cwd=ROOT, env=env, log_dir=record_dir.parent)

    def get(self) -> bool:
        """True if the app answers ``GET /`` with 200."""
        return self.status() == 200


@pytest.fixture
def server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    return server_factory()


def _run(
    tmp_path: Path,
    server: RedisServer,
    build: str,
    options: list[list[str]],
    *,
    jobs: str = "tick:1:0.05:5",
    during: Callable[[list[Uwsgi]], None] = lambda u: None,
    settle: bool = False,
    until: Callable[[History], bool] = lambda h: True,
) -> tuple[History, float, list[Uwsgi], float]:
    """Start one master per entry of ``options``, wait for SLOTS + 1 slots, stop them all.

    ``until``: also wait (up to 60 s) until the records show what the test is about.
    ``settle``: before the stop, wait until the masters' output has been quiet for 3 s.
    A uWSGI 2.0 master that gets SIGINT while it sleeps before respawning a recycled
    worker ("worker respawning too fast") respawns it anyway and then waits for it
    forever: seen once in CI. The respawn sleep is 2 s, so 3 s of quiet means none is
    under way.
    """
    records = tmp_path / "records"
    records.mkdir()
    prefix = f"uwsgi-{tmp_path.name}"
    masters: list[Uwsgi] = []
    stopped_at: Optional[float] = None
    try:
        for extra in options:
            masters.append(Uwsgi(build, server.url, records, jobs, extra, prefix))
        for master in masters:
            master.wait_serving()
        # Two seconds on: a worker that starts just after a slot boundary runs the slot
        # before it as a catch-up, and the slot due meanwhile is skipped as busy (overlap
        # "skip"), which is the runner's policy, not what these tests are about.
        t0 = int(time.time()) + 2.0

        def enough() -> bool:
            during(masters)
            history = History.read(records)
            return len(_slots_since(history, "tick", t0)) >= SLOTS + 1 and until(history)

        wait_until(enough, timeout=60, interval=0.1)
        stopped_at = time.time()  # the window checked ends here, before any settling
        if settle:
            _wait_quiet(masters, quiet=3.0, timeout=30)
    finally:
        if stopped_at is None:  # the wait above failed: the window ends now
            stopped_at = time.time()
        statuses = [master.stop() for master in masters]
    for master, status in zip(masters, statuses):
        assert not master.killed, f"uWSGI needed SIGKILL after SIGINT:\n{master.output()}"
        assert status == 0, master.output()
    return History.read(records), t0, masters, stopped_at


def _wait_quiet(masters: list[Uwsgi], *, quiet: float, timeout: float) -> None:
    """Wait until no master has written anything for ``quiet`` seconds."""
    seen = {id(m): (len(m.output()), time.monotonic()) for m in masters}

    def still() -> bool:
        now = time.monotonic()
        for m in masters:
            size = len(m.output())
            if size != seen[id(m)][0]:
                seen[id(m)] = (size, now)
        return all(now - changed >= quiet for _, changed in seen.values())

    wait_until(still, timeout=timeout, interval=0.2)


def _assert_in_workers_only(history: History, masters: list[Uwsgi], window: list[int]) -> None:
    runners = {r["pid"] for r in history.events("start", "tick") if r["slot"] in window}
    workers = {r["pid"] for r in history.events("worker")}
    assert not runners & {m.proc.pid for m in masters}, "a uWSGI master ran a job"
    assert runners <= workers
    assert all(all(r["running"]) for r in history.events("worker"))


@pytest.mark.parametrize("build", BUILDS)
def test_two_masters_fork_and_lazy_apps_run_each_slot_once(
    tmp_path: Path, server: RedisServer, build: str
) -> None:
    """Two masters (fork mode; lazy-apps), 3 workers each, enable-threads: each slot once.

    Every worker is a live runner (six heartbeats, one per worker pid), both masters run
    none, and SIGINT stops each master and its workers without SIGKILL.
    """
    admin = Admin(redis.Redis.from_url(server.url), f"uwsgi-{tmp_path.name}")
    seen: list[set[int]] = []
    history, t0, masters, stopped_at = _run(
        tmp_path,
        server,
        build,
        [["--enable-threads"], ["--enable-threads", "--lazy-apps"]],
        during=lambda _: seen.append({r.pid for r in admin.runners()}),
    )
    window = _assert_each_slot_once(history, t0, stopped_at, slots=SLOTS)
    _assert_in_workers_only(history, masters, window)
    workers = {r["pid"] for r in history.events("worker")}
    assert len(workers) == 6
    assert {r["master"] for r in history.events("worker")} == {m.proc.pid for m in masters}
    assert workers in seen, f"runners seen {seen[-3:]}, workers {workers}"


_pokes: set[int] = set()


def _poke_five_times_a_second(masters: list[Uwsgi]) -> None:
    """About 1.7 requests per worker per second: each worker lives 2-3 s.

    (max-requests 4, min-worker-lifetime 2.) Faster, all three workers recycle within
    the same second, uWSGI's master throttles the respawns ("worker respawning too
    fast", a 2 s sleep), and for a slot or two no worker exists to run it.
    """
    tick = int(time.time() * 5)
    if tick not in _pokes:
        _pokes.add(tick)
        for master in masters:
            master.get()


def test_recycled_workers_hand_over_their_running_slot(tmp_path: Path, server: RedisServer) -> None:
    """--max-requests recycling (pyuwsgi, fork mode): each slot once; a cut run hands over.

    ``long`` runs 2.5 s of every 1 s slot with a 60 s lease and overlap ``skip``: a worker
    recycled mid-run must end its lease at exit, or every later slot would be skipped as
    busy for a minute. The master forks each replacement worker, whose post-fork hook
    starts its runner.
    """
    history, t0, masters, stopped_at = _run(
        tmp_path,
        server,
        "pyuwsgi",
        [["--enable-threads", "--max-requests", "4", "--min-worker-lifetime", "2"]],
        jobs="tick:1:0.05:5,long:1:2.5:60",
        during=_poke_five_times_a_second,
        settle=True,
        # a recycle must land inside a run of `long`: wait for one (3 s back, so the next
        # attempt had time to start) rather than hope it falls in the first slots
        until=lambda h: any(
            r["outcome"] == "cancelled" and r["t"] < time.time() - 3
            for r in h.events("end", "long")
        ),
    )
    window = _assert_each_slot_once(history, t0, stopped_at, handover=True, slots=SLOTS)
    _assert_in_workers_only(history, masters, window)
    assert len({r["pid"] for r in history.events("worker")}) > 3, "no worker was recycled"
    _assert_recycled_runs_handed_over(history, stopped_at)


def test_without_enable_threads_pyuwsgi_runs_each_slot_once(
    tmp_path: Path, server: RedisServer
) -> None:
    """pyuwsgi without enable-threads (its build runs Python threads anyway): each slot once."""
    history, t0, masters, stopped_at = _run(tmp_path, server, "pyuwsgi", [[]])
    window = _assert_each_slot_once(history, t0, stopped_at, slots=SLOTS)
    _assert_in_workers_only(history, masters, window)
    assert len({r["pid"] for r in history.events("worker")}) == 3


@pytest.mark.parametrize(
    "lazy", [pytest.param([], id="fork"), pytest.param(["--lazy-apps"], id="lazy-apps")]
)
def test_without_enable_threads_debian_refuses_with_the_option_to_add(
    tmp_path: Path, server: RedisServer, lazy: list[str]
) -> None:
    """Debian's build without enable-threads: the app fails to load, naming the option."""
    records = tmp_path / "records"
    records.mkdir()
    uwsgi = Uwsgi("debian", server.url, records, "tick:1:0.05:5", lazy, f"uwsgi-{tmp_path.name}")
    try:
        wait_until(lambda: "enable-threads = true" in uwsgi.output(), timeout=30, interval=0.1)
        assert not uwsgi.get()
    finally:
        uwsgi.stop()
    out = uwsgi.output()
    assert "ConfigurationError: uWSGI runs no Python threads in this configuration" in out
    assert "add 'enable-threads = true' (or 'threads = N')" in out
    assert not History.read(records).events("start")
