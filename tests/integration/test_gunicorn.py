"""Real gunicorn masters and workers serving a Flask app with cronlock: one run per slot.

Each case starts ``gunicorn -w 4`` on ``tests/gunicorn_app`` (the cronlock hooks in its
``gunicorn.conf.py``) against a private Redis server, lets a 1 s interval job run for 9+
slots, stops gunicorn, and checks the start/end records every process appended to its
own file (read with ``tests.history.History``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Callable, Optional

import pytest
import redis

from cronlock import Admin, CronRunner
from cronlock.testing import RedisServer, wait_until
from tests import procs
from tests.history import ROOT, History

pytest.importorskip("gunicorn")
pytest.importorskip("flask")

pytestmark = pytest.mark.slow

CONF = ROOT / "tests" / "gunicorn_app" / "gunicorn.conf.py"
NO_HOOKS = ROOT / "tests" / "gunicorn_app" / "nohooks.conf.py"
SLOTS = 9


class Gunicorn:
    """One gunicorn master (and its workers) serving the test app."""

    def __init__(
        self,
        redis_url: str,
        record_dir: Path,
        jobs: str,
        extra: list[str],
        *,
        conf: Path = CONF,
        prefix: Optional[str] = None,
    ) -> None:
        self.record_dir = record_dir
        env = {
            **os.environ,
            "GT_REDIS_URL": redis_url,
            "GT_RECORD_DIR": str(record_dir),
            "GT_JOBS": jobs,
            "GT_PREFIX": prefix or f"gunicorn-{record_dir.name}",
            "GT_AUTOSTART": "1" if "--preload" in extra else "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
        }
        args = [sys.executable, "-m", "gunicorn", "-c", str(conf), "-w", "4", *extra]
        # It serves on a socket bound here and passed down: no port race with others.
        self.proc, self.port = procs.spawn_listening(
            lambda fd: [*args, "-b", f"fd://{fd}", "tests.gunicorn_app.app:app"],
            cwd=ROOT,
            env=env,
        )

    def get(self) -> Optional[dict[str, object]]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=5) as resp:
                body: dict[str, object] = json.loads(resp.read())
                return body
        except OSError:
            return None

    def wait_serving(self) -> None:
        wait_until(lambda: self.proc.poll() is not None or self.get(), timeout=60, interval=0.2)
        assert self.proc.poll() is None, "gunicorn exited during startup"

    def stop(self) -> int:
        """SIGTERM the master (it stops its workers); its status. Whatever is left of
        the process group is killed in any case."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(40)
        finally:
            procs.end(self.proc)


def _slots_since(history: History, job: str, t0: float) -> list[int]:
    return sorted(s for s in history.starts_by_slot(job) if s / 1000 >= t0)


def _run(
    tmp_path: Path,
    server: RedisServer,
    extra: list[str],
    *,
    jobs: str = "tick:1:0.05:5",
    during: Callable[[Gunicorn], None] = lambda g: None,
    conf: Path = CONF,
    prefix: Optional[str] = None,
) -> tuple[History, float, int, float]:
    gunicorn = Gunicorn(server.url, tmp_path, jobs, extra, conf=conf, prefix=prefix)
    try:
        gunicorn.wait_serving()
        t0 = int(time.time()) + 1.0

        def enough() -> bool:
            during(gunicorn)
            return len(_slots_since(History.read(tmp_path), "tick", t0)) >= SLOTS + 1

        wait_until(enough, timeout=60, interval=0.1)
    finally:
        stopped_at = time.time()
        status = gunicorn.stop()
    assert status == 0
    return History.read(tmp_path), t0, gunicorn.proc.pid, stopped_at


def _assert_each_slot_once(
    history: History, t0: float, stopped_at: float, *, handover: bool = False, slots: int = SLOTS
) -> list[int]:
    """Every 1 s slot of ``tick`` from t0 until a second before the stop ran exactly once.

    (A run in progress when gunicorn is told to stop is cancelled by the shutdown:
    the window ends before it.)

    Without ``handover``: each slot started once and completed once. With it (workers
    recycled mid-run), a run cut short ends "cancelled" and hands its slot over: the
    slot may then start again as attempt + 1 on another worker (never overlapping), or,
    when the next slot comes first, be superseded by it. Either way no slot is missed,
    none completes twice, and no two runs of a slot overlap.
    """
    last = max(s for s in _slots_since(history, "tick", t0) if s / 1000 + 1 <= stopped_at)
    window = list(range(int(t0 * 1000), last + 1, 1000))
    assert len(window) >= slots
    starts = history.starts_by_slot("tick")
    done = history.completions_by_slot("tick")
    ends = {(r["slot"], r["attempt"]): r for r in history.events("end", "tick")}
    for slot in window:
        runs = starts.get(slot, [])
        if not handover:
            assert len(runs) == 1, f"slot {slot}: starts {runs}"
            assert len(done.get(slot, [])) == 1, f"slot {slot}: completions {done.get(slot)}"
            continue
        assert runs, f"slot {slot} never started"
        assert len(done.get(slot, [])) <= 1, f"slot {slot}: completions {done.get(slot)}"
        if not done.get(slot):
            last = ends.get((slot, max(r["attempt"] for r in runs)))
            assert last is not None, f"slot {slot}: the run neither completed nor ended"
            assert last["outcome"] == "cancelled", last
    if handover:
        _assert_no_overlap(history, "tick")
    return window


def _assert_recycled_runs_handed_over(history: History, stopped_at: float) -> None:
    """Runs of ``long`` cut short by a recycled worker were handed over: they ended
    (cancelled) when their worker exited, never overlapped, and a later attempt or slot
    started within 15 s (without a handover the 60 s lease would hold the job)."""
    exits = {r["pid"]: r["t"] for r in history.events("worker_exit")}
    long_starts = history.events("start", "long")
    _assert_no_overlap(history, "long")
    handed_over = [
        r
        for r in history.events("end", "long")
        if r["outcome"] == "cancelled" and r["t"] < stopped_at - 3
    ]
    assert handed_over, "no run of 'long' was interrupted by a recycled worker"
    for end in handed_over:
        assert end["pid"] in exits  # it ended because its worker exited
        later = [s for s in long_starts if s["t"] > end["t"]]
        assert later, f"nothing ran after the handover at {end['t']}"
        assert later[0]["t"] - end["t"] < 15, f"next run {later[0]['t'] - end['t']:.1f} s later"
        assert (later[0]["slot"], later[0]["attempt"]) > (end["slot"], end["attempt"])


def _assert_no_overlap(history: History, job: str) -> None:
    """Attempts of one slot ran one after the other, each earlier one cut short.

    An attempt may leave no start at all: won early and handed over before the slot's
    boundary (its worker recycled then), its handler never ran.
    """
    ends = {(r["slot"], r["attempt"]): r for r in history.events("end", job)}
    for slot, unordered in history.starts_by_slot(job).items():
        runs = sorted(unordered, key=lambda r: r["attempt"])
        attempts = [r["attempt"] for r in runs]
        assert attempts == sorted(set(attempts)), runs  # no attempt started twice
        assert all(r["t"] >= slot / 1000 for r in runs), runs  # none before its boundary
        for earlier, later in zip(runs, runs[1:]):
            end = ends.get((slot, earlier["attempt"]))
            assert end is not None, f"{job} slot {slot} attempt {earlier['attempt']} never ended"
            assert end["outcome"] == "cancelled", end
            assert end["t"] <= later["t"], f"{job} slot {slot}: attempts overlapped"


@pytest.fixture
def server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    return server_factory()


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param([], id="sync"),
        pytest.param(["--preload"], id="preload"),
        pytest.param(["-k", "gthread", "--threads", "4"], id="gthread"),
    ],
)
def test_four_workers_run_each_slot_exactly_once(
    tmp_path: Path, server: RedisServer, extra: list[str]
) -> None:
    """gunicorn -w 4 (sync, --preload + autostart, gthread): each slot runs once, in a worker.

    Each worker is also its own runner to operators: four heartbeats, each naming its
    worker's pid (also under --preload, where the runner object was forked from the master).
    """
    admin = Admin(redis.Redis.from_url(server.url), f"gunicorn-{tmp_path.name}")
    seen: list[set[int]] = []

    def look(gunicorn: Gunicorn) -> None:
        seen.append({r.pid for r in admin.runners()})

    history, t0, master, stopped_at = _run(
        tmp_path, server, extra, during=look, prefix=admin.prefix
    )
    window = _assert_each_slot_once(history, t0, stopped_at)
    runners = {r["pid"] for r in history.events("start", "tick") if r["slot"] in window}
    assert master not in runners, "the master must not run jobs (when_ready stops its runner)"
    workers = {r["pid"] for r in history.events("worker")}
    assert runners <= workers
    assert all(all(r["running"]) for r in history.events("worker"))
    assert workers in seen, f"runners seen {seen[-3:]}, workers {workers}"


def test_preload_without_hooks_runs_in_master_and_workers(
    tmp_path: Path, server: RedisServer
) -> None:
    """--preload, autostart, no hooks: master and restarted worker copies share slots, once each.

    The runner is started in the master at import; gunicorn forks four workers from it,
    and the runner's fork handler restarts a copy in each with a fresh connection pool.
    Jobs keep running, each slot once, whichever process wins it.
    """
    history, t0, master, stopped_at = _run(tmp_path, server, ["--preload"], conf=NO_HOOKS)
    window = _assert_each_slot_once(history, t0, stopped_at)
    runners = {r["pid"] for r in history.events("start", "tick") if r["slot"] in window}
    workers = {r["pid"] for r in history.events("worker")}
    assert len(workers) == 4
    assert runners <= workers | {master}
    assert all(all(r["running"]) for r in history.events("worker"))


def test_recycled_workers_keep_one_run_per_slot_and_hand_over(
    tmp_path: Path, server: RedisServer
) -> None:
    """--max-requests recycling: each slot once; a job cut short hands its slot over at once.

    ``long`` runs 2.5 s of every 1 s slot with a 60 s lease and overlap ``skip``. Without
    a handover, a worker recycled mid-run would leave its lease live for 60 s and every
    following slot would be skipped as busy; with it, the next slot starts on another
    worker about a second later.
    """

    def poke(gunicorn: Gunicorn) -> None:
        gunicorn.get()

    history, t0, _, stopped_at = _run(
        tmp_path,
        server,
        ["--max-requests", "4"],
        jobs="tick:1:0.05:5,long:1:2.5:60",
        during=poke,
    )
    _assert_each_slot_once(history, t0, stopped_at, handover=True)
    workers = {r["pid"] for r in history.events("worker")}
    assert len(workers) > 4, "no worker was recycled"
    _assert_recycled_runs_handed_over(history, stopped_at)


def test_a_forked_runner_is_a_runner_of_its_own(redis_server: RedisServer) -> None:
    """After fork() the child's copy of a runner has its own id and names its own pid."""
    runner = CronRunner(redis.Redis.from_url(redis_server.url), prefix="fork-identity")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once, skipping pytest's cleanup
        os.write(write_end, f"{runner.runner_id} {runner.holder}".encode())
        os._exit(0)
    os.close(write_end)
    try:
        with os.fdopen(read_end) as pipe:
            child_id, child_holder = pipe.read().split()
    finally:
        assert procs.reap(pid) == 0
    assert child_id != runner.runner_id
    assert child_holder.split(":")[1] == str(pid)
    assert runner.holder.split(":")[1] == str(os.getpid())
