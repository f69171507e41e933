"""A runner started before fork() (gunicorn --preload, a runner started at import)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from cronlock import CronRunner, IntervalSchedule, JobContext, redis_lock
from cronlock.testing import RedisServer
from tests import procs

pytestmark = pytest.mark.slow


def _record(path: Path):  # type: ignore[no-untyped-def]
    def handler(ctx: JobContext) -> None:
        with path.open("a") as f:
            f.write(json.dumps({"pid": os.getpid(), "slot": ctx.slot_ms}) + "\n")

    return handler


def _fork_and_run(runner: CronRunner, seconds: float, marker: Path) -> None:
    """Fork; both sides keep the runner for ``seconds``; the child notes its threads."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            time.sleep(0.3)
            names = sorted(t.name for t in threading.enumerate())
            marker.write_text(json.dumps({"threads": names, "running": runner.running}))
            time.sleep(seconds)
            runner.stop(timeout=2)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    try:
        time.sleep(seconds)
        runner.stop(timeout=2)
    finally:
        code = procs.reap(pid)
    assert code == 0


def test_a_started_runner_restarts_in_the_child_and_slots_still_run_once(
    server_factory, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """After fork both processes run the scheduler; each 0.25 s slot still runs once."""
    server: RedisServer = server_factory()
    runs = tmp_path / "runs.jsonl"
    marker = tmp_path / "child.json"
    runner = CronRunner(server.client(socket_timeout=2), prefix="fork")
    runner.add_job(_record(runs), IntervalSchedule(0.25), key="tick", catch_up=0.2)
    runner.start()
    time.sleep(0.3)  # a runner that has already claimed and run before the fork
    _fork_and_run(runner, 3.0, marker)
    child = json.loads(marker.read_text())
    assert child["running"] is True
    assert "cronlock-scheduler" in child["threads"]
    records = [json.loads(line) for line in runs.read_text().splitlines()]
    slots = [r["slot"] for r in records]
    assert len(slots) == len(set(slots)), "a slot ran twice across parent and child"
    assert len(slots) >= 10


def test_after_fork_stop_leaves_the_child_copy_stopped(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With after_fork="stop", the child's copy of a started runner has no threads."""
    server: RedisServer = server_factory()
    marker = tmp_path / "child.json"
    runner = CronRunner(server.client(socket_timeout=2), prefix="fork", after_fork="stop")
    runner.add_job(lambda: None, IntervalSchedule(3600), key="idle")
    runner.start()
    _fork_and_run(runner, 0.2, marker)
    child = json.loads(marker.read_text())
    assert child["running"] is False
    assert "cronlock-scheduler" not in child["threads"]


def _fork_while_inside_the_pool(pool: Any, in_child: Callable[[], object]) -> str:
    """Fork while another thread is inside ``pool``, as a runner thread is for a moment on
    every Redis call; what the child did: "ok", "failed" (raised or falsy) or "hung"."""
    inside, leave = threading.Event(), threading.Event()

    def a_runner_thread_mid_call() -> None:
        with pool._lock:  # what get_connection() and release() hold
            inside.set()
            leave.wait(2)

    thread = threading.Thread(target=a_runner_thread_mid_call)
    thread.start()
    inside.wait(2)
    threading.Timer(0.2, leave.set).start()  # the thread leaves the pool soon after
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            code = 0 if in_child() else 1
        finally:
            os._exit(code)
    try:
        thread.join()
    finally:
        code = procs.reap(pid, timeout=10)
    return {0: "ok", -signal.SIGKILL: "hung"}.get(code, "failed")


def test_a_fork_while_a_runner_thread_is_inside_the_pool_leaves_the_child_working(
    server_factory: Callable[..., RedisServer],
) -> None:
    """The runner's client works in a child forked while a runner thread held its pool."""
    server = server_factory()
    client = server.client(socket_timeout=2)
    runner = CronRunner(client, prefix="fork-pool")
    runner.add_job(lambda: None, IntervalSchedule(3600), key="idle")
    runner.start()
    try:
        outcome = _fork_while_inside_the_pool(
            client.connection_pool, lambda: client.ping() and runner.client.ping()
        )
    finally:
        runner.stop(timeout=2)
    assert outcome == "ok"


def test_a_fork_while_the_renewal_thread_is_inside_a_lock_clients_pool(
    server_factory: Callable[..., RedisServer],
) -> None:
    """A renewing lock's client works in a child forked while its pool was held."""
    server = server_factory()
    client = server.client(socket_timeout=2)
    with redis_lock(client, "fork-held", ttl=30, renew=True):
        outcome = _fork_while_inside_the_pool(client.connection_pool, client.ping)
    assert outcome == "ok"
