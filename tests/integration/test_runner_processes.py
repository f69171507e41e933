"""Real replica processes against a real server: exactly once per slot, under faults.

Each test starts its own private server and replica processes (``tests/replica.py``),
then checks the start/end records every replica appended to its own file.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Callable

import pytest

from cronlock.testing import RedisServer, wait_until
from tests.history import History, Replicas, kill, wait_for_record

pytestmark = pytest.mark.slow


def _slots_after(history: History, job: str, t0: float) -> list[int]:
    return sorted(s for s in history.starts_by_slot(job) if s / 1000 >= t0)


def _run_until_slots(record_dir: Path, job: str, t0: float, count: int, timeout: float) -> None:
    wait_until(
        lambda: len(_slots_after(History.read(record_dir), job, t0)) >= count,
        timeout=timeout,
        interval=0.1,
    )


def _assert_each_slot_once(history: History, job: str, first: float, last: float) -> list[int]:
    """Every grid slot in [first, last] started once and completed once; none missed."""
    starts = history.starts_by_slot(job)
    done = history.completions_by_slot(job)
    window = list(range(int(first * 1000), int(last * 1000) + 1, 1000))
    for slot in window:
        assert len(starts.get(slot, [])) == 1, f"slot {slot}: starts {starts.get(slot)}"
        assert len(done.get(slot, [])) == 1, f"slot {slot}: completions {done.get(slot)}"
    return window


@pytest.fixture
def server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    return server_factory()


def test_four_replicas_run_every_one_second_slot_exactly_once(
    server: RedisServer, tmp_path: Path
) -> None:
    """4 replica processes x a 1 s interval job x 10+ slots: each slot once, none missed."""
    replicas = Replicas(server.url, tmp_path, ["tick:1:0.05:3"])
    try:
        for _ in range(4):
            replicas.start()
        t0 = int(time.time()) + 1.0
        _run_until_slots(tmp_path, "tick", t0, 11, timeout=30)
    finally:
        replicas.stop_all()
    history = History.read(tmp_path)
    slots = _slots_after(history, "tick", t0)
    window = _assert_each_slot_once(history, "tick", t0, slots[-2] / 1000)
    assert len(window) >= 10
    winners = {r["pid"] for s in window for r in history.starts_by_slot("tick")[s]}
    assert winners <= {p.pid for p in replicas.procs}


def test_skewed_clocks_still_run_each_slot_once(server: RedisServer, tmp_path: Path) -> None:
    """Replicas with clocks at -0.4 s, 0 and +0.4 s and a 0.1 s job: still exactly once.

    With a lock keyed by job name only, the +0.4 s replica would acquire, run 0.1 s and
    release before the -0.4 s replica even looked, which would then acquire the free
    lock and run the same occurrence again. Claims keyed by slot make that late look
    find the slot done.
    """
    replicas = Replicas(server.url, tmp_path, ["skew:1:0.1:3"])
    try:
        for offset in (-0.4, 0.0, 0.4):
            replicas.start(offset=offset)
        t0 = int(time.time()) + 1.0
        _run_until_slots(tmp_path, "skew", t0, 9, timeout=30)
    finally:
        replicas.stop_all()
    history = History.read(tmp_path)
    slots = _slots_after(history, "skew", t0)
    window = _assert_each_slot_once(history, "skew", t0, slots[-2] / 1000)
    assert len(window) >= 7


LEASE = 1.5  # seconds; renewed every LEASE / 3


def test_kill_9_of_the_running_replica_is_taken_over_as_attempt_2(
    server: RedisServer, tmp_path: Path
) -> None:
    """kill -9 of the owner mid-run: another replica runs the same slot as attempt 2 in time."""
    replicas = Replicas(server.url, tmp_path, [f"long:6:3:{LEASE}"])
    try:
        for _ in range(3):
            replicas.start()
        first = wait_for_record(
            tmp_path, lambda r: r["event"] == "start" and r["attempt"] == 1, timeout=20
        )
        killed_at = time.time()
        kill(first["pid"])
        second = wait_for_record(
            tmp_path,
            lambda r: r["event"] == "start" and r["slot"] == first["slot"] and r["attempt"] == 2,
            timeout=10,
        )
    finally:
        replicas.stop_all()
    assert second["pid"] != first["pid"]
    assert second["fence"] > first["fence"]
    # The lease was renewed at most LEASE/3 before the kill, so it lapses at most LEASE
    # after it; watchers look again just after the deadline they saw. Generous margin for a
    # loaded 2-core machine: this bounds the takeover, it does not measure its speed.
    assert second["t"] - killed_at <= LEASE + LEASE / 3 + 1.5


def test_a_frozen_owner_wakes_cancelled_and_cannot_finish_the_slot(
    server: RedisServer, tmp_path: Path
) -> None:
    """SIGSTOP past the lease, then SIGCONT: the old owner is cancelled; the successor finishes."""
    replicas = Replicas(server.url, tmp_path, [f"frozen:10:6:{LEASE}"])
    try:
        for _ in range(2):
            replicas.start()
        first = wait_for_record(
            tmp_path, lambda r: r["event"] == "start" and r["attempt"] == 1, timeout=20
        )
        kill(first["pid"], signal.SIGSTOP)
        second = wait_for_record(
            tmp_path,
            lambda r: r["event"] == "start" and r["slot"] == first["slot"] and r["attempt"] == 2,
            timeout=10,
        )
        kill(first["pid"], signal.SIGCONT)
        old_end = wait_for_record(
            tmp_path, lambda r: r["event"] == "end" and r["pid"] == first["pid"], timeout=10
        )
        wait_for_record(
            tmp_path, lambda r: r["event"] == "end" and r["pid"] == second["pid"], timeout=15
        )
        state = {
            k.decode(): v.decode()
            for k, v in server.client().hgetall("replica-test:job:{frozen}").items()
        }
    finally:
        replicas.stop_all()
    assert old_end["outcome"] == "cancelled"
    assert second["fence"] > first["fence"]
    assert state["status"] == "done"
    assert state["attempt"] == "2"
    assert int(state["fence"]) == second["fence"]  # the stale owner's finish changed nothing


def test_redis_killed_and_restarted_fails_closed_then_resumes(
    server: RedisServer, tmp_path: Path
) -> None:
    """Redis down 3 s: nothing starts while it is away, replicas survive, slots resume once."""
    replicas = Replicas(server.url, tmp_path, ["hb:1:0.05:3"])
    try:
        for _ in range(3):
            replicas.start()
        _run_until_slots(tmp_path, "hb", time.time(), 2, timeout=15)
        server.kill()
        down_at = time.time()
        time.sleep(3)  # the outage itself: real time passing is the fault being injected
        up_at = time.time()
        server.start()
        after = int(up_at) + 2.0
        _run_until_slots(tmp_path, "hb", after, 4, timeout=20)
        assert len(replicas.alive()) == 3
    finally:
        replicas.stop_all()
    history = History.read(tmp_path)
    during = [r for r in history.events("start", "hb") if down_at + 0.05 < r["t"] < up_at]
    assert during == []
    errors = [r for r in history.events("error") if r["phase"] == "acquire"]
    assert errors, "the outage was reported to on_error with phase acquire"
    slots = _slots_after(history, "hb", after)
    _assert_each_slot_once(history, "hb", after, slots[-2] / 1000)
