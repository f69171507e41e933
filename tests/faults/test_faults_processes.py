"""Fault scenarios with replica processes on one private server: baseline, kill -9,
SIGSTOP, Redis restarted empty, Redis paused.

Each test starts real replica processes (``tests/replica.py``), injects its fault at
recorded times, then hands every record to the checker (``tests/faults/checker.py``),
which asserts the promises and adds a row to the results table.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Callable

import pytest

from cronlock.testing import RedisServer
from tests.faults.checker import Fault, JobSpec, Report, check
from tests.history import History, Replicas, kill, wait_for_record

pytestmark = [pytest.mark.slow, pytest.mark.faults]

Record = Callable[[Report], Report]


def specs(jobs: list[str]) -> list[JobSpec]:
    return [JobSpec.parse(j) for j in jobs]


def test_baseline_five_replicas_three_jobs(
    server: RedisServer, record_dir: Path, record_report: Record
) -> None:
    """5 replicas x 3 jobs (0.1 s, 0.5 s, one longer than its 1 s interval), no faults:
    every slot runs once, finishes once, none missed, fences in order."""
    jobs = ["short:1:0.1:2", "half:1:0.5:2", "long:1:2.5:1.5"]
    replicas = Replicas(server.url, record_dir, jobs)
    try:
        replicas.start_many(5)
        t0 = time.time() + 1
        time.sleep(20)
        t1 = time.time() - 3
        stopping = time.time()
    finally:
        replicas.stop_all()
    history = History.read(record_dir)
    report = record_report(check("1 baseline 5x3", history, specs(jobs), (t0, t1)))
    report.assert_guarantees()
    assert not report.dup_effects
    # No takeover while nothing is faulted. When the replicas are stopped one by one at
    # the end, a stopping replica hands its running slot over and one still running takes
    # it at once (attempt 2): that is the graceful handover, so only runs that started
    # before the stop count here.
    early = [r for r in history.events("start") if r["attempt"] > 1 and r["t"] < stopping]
    assert early == []
    assert report.explained.get("busy", 0) > 0  # the long job skipped slots while it ran


FAST = ("--socket-timeout", "0.5")  # calls to a dead or frozen server fail quickly


def _start_of(record_dir: Path, job: str, after: float, alive: set[int]) -> dict[str, object]:
    return wait_for_record(
        record_dir,
        lambda r: (
            r["event"] == "start" and r["job"] == job and r["t"] > after and r["pid"] in alive
        ),
        timeout=20,
    )


def test_kill_9_of_the_running_owner_at_random_moments(
    server: RedisServer, record_dir: Path, record_report: Record
) -> None:
    """kill -9 of the slot's owner, 4 times at random moments of its run: each slot is taken
    over (attempt + 1) within ttl + ttl/3 + margin, never overlaps, finishes once."""
    jobs = ["victim:5:2:1.2", "short:1:0.1:2"]
    rng = random.Random(4)
    replicas = Replicas(server.url, record_dir, jobs, extra=FAST)
    faults: list[Fault] = []
    try:
        replicas.start_many(4)
        t0 = time.time()
        last = t0
        for _ in range(4):
            alive = {p.pid for p in replicas.alive()}
            run = _start_of(record_dir, "victim", last, alive)
            time.sleep(rng.uniform(0.0, 1.0))
            kill(int(run["pid"]))  # type: ignore[call-overload]
            last = time.time()
            faults.append(Fault("kill", last, pid=int(run["pid"])))  # type: ignore[call-overload]
            replicas.spawn(extra=())  # a replacement joins, as a supervisor would restart it
        time.sleep(3)
        t1 = time.time() - 3
    finally:
        replicas.stop_all()
    report = record_report(
        check("2 kill -9 owner x4", History.read(record_dir), specs(jobs), (t0, t1), tuple(faults))
    )
    report.assert_guarantees()
    # every killed run was taken over, or was already the slot's last allowed attempt
    assert len(report.takeover_delays) + report.explained["exhausted"] == 4, report.notes


def test_sigstop_owner_past_its_lease_wakes_cancelled(
    server: RedisServer, record_dir: Path, record_report: Record
) -> None:
    """SIGSTOP of the owner for 2.5 s (lease 1.2 s), then SIGCONT, twice: a successor takes
    the slot over, the woken owner's run is cancelled, its finish is refused, and its
    fencing token is older than the one Redis holds."""
    jobs = ["frozen:8:4:1.2"]
    replicas = Replicas(server.url, record_dir, jobs, extra=FAST)
    faults: list[Fault] = []
    stale: list[tuple[int, int, int]] = []
    try:
        replicas.start_many(3)
        t0 = time.time()
        last = t0
        for _ in range(2):
            run = _start_of(record_dir, "frozen", last, {p.pid for p in replicas.alive()})
            pid = int(run["pid"])  # type: ignore[call-overload]
            time.sleep(0.3)
            stopped_at = time.time()
            kill(pid, signal.SIGSTOP)
            time.sleep(2.5)
            kill(pid, signal.SIGCONT)
            faults.append(Fault("stop", stopped_at, time.time(), pid=pid))
            end = wait_for_record(
                record_dir,
                lambda r, pid=pid, run=run: (
                    r["event"] == "end" and r["pid"] == pid and r["slot"] == run["slot"]
                ),
                timeout=10,
            )
            assert end["outcome"] == "cancelled"
            fence = int(server.client().hget("replica-test:job:{frozen}", "fence") or 0)
            stale.append((int(run["slot"]), int(run["fence"]), fence))  # type: ignore[call-overload]
            last = time.time()
        time.sleep(4.5)
        t1 = time.time() - 5
    finally:
        replicas.stop_all()
    history = History.read(record_dir)
    report = record_report(
        check("3 SIGSTOP owner 2.5s x2", history, specs(jobs), (t0, t1), tuple(faults))
    )
    report.assert_guarantees()
    assert len(report.takeover_delays) == 2
    for slot, old_fence, current in stale:
        assert old_fence < current, "the woken owner's token is stale"
        accepted = [r for r in history.events("finish", "frozen") if r["slot"] == slot and r["ok"]]
        assert len(accepted) == 1, accepted
    assert report.cancel_lags  # the woken owner noticed, and how late is in the table


def test_redis_killed_and_restarted_empty(
    server: RedisServer, record_dir: Path, record_report: Record
) -> None:
    """Redis SIGKILLed for 3 s and restarted empty: nothing runs while it is away (fail
    closed), every replica survives, slots resume, and a replica 0.4 s late still cannot
    run a slot twice once Redis is back."""
    jobs = ["hb:1:0.05:2", "mid:2:0.5:2"]
    replicas = Replicas(server.url, record_dir, jobs, extra=FAST)
    try:
        replicas.start_many(2)
        replicas.start(offset=-0.4)
        replicas.start(offset=0.4)
        t0 = time.time() + 1
        time.sleep(4)
        server.kill()
        down = time.time()
        time.sleep(3)  # the outage itself
        # The new epoch of Redis state begins when the new server may first answer,
        # before start() has seen it answer its own probe: a replica may claim first.
        restarted = time.time()
        server.start()
        up = time.time()
        time.sleep(8)
        assert len(replicas.alive()) == 4
        t1 = time.time() - 2
    finally:
        replicas.stop_all()
    history = History.read(record_dir)
    faults = (Fault("outage", down, up), Fault("reset", restarted))
    report = record_report(
        check("4 Redis killed, empty 3s", history, specs(jobs), (t0, t1), faults)
    )
    report.assert_guarantees()
    # Until the restart began: the new server may answer (and a run start on it) before
    # start() returns at ``up``.
    during = [r for r in history.events("start") if down + 0.05 < r["t"] < restarted]
    assert during == [], "fail closed: no run started while Redis was away"
    assert [r for r in history.events("error") if r["phase"] == "acquire"]
    assert report.explained["outage"] >= 1


def test_redis_frozen_longer_than_the_lease(
    server: RedisServer, record_dir: Path, record_report: Record
) -> None:
    """redis-server SIGSTOPped for 3 s while a 1.2 s lease runs: the owner cancels its run
    before Redis answers again, no two runs overlap under valid leases, work resumes."""
    jobs = ["work:8:4:1.2", "hb:1:0.05:2"]
    replicas = Replicas(server.url, record_dir, jobs, extra=FAST)
    try:
        replicas.start_many(3)
        t0 = time.time()
        run = _start_of(record_dir, "work", t0, {p.pid for p in replicas.procs})
        time.sleep(0.3)
        server.pause()
        paused = time.time()
        time.sleep(3)
        server.resume()
        resumed = time.time()
        time.sleep(9)
        t1 = time.time() - 2
    finally:
        replicas.stop_all()
    history = History.read(record_dir)
    faults = (Fault("outage", paused, resumed),)
    report = record_report(check("5 Redis SIGSTOP 3s", history, specs(jobs), (t0, t1), faults))
    report.assert_guarantees()
    first = [
        r
        for r in history.events("end", "work")
        if r["slot"] == run["slot"] and r["pid"] == run["pid"]
    ]
    assert first
    assert first[0]["outcome"] == "cancelled"
    assert first[0]["t"] < resumed, "the owner gave up before Redis came back"
