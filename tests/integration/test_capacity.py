"""A runner claims no more slots than it has idle workers; the rest wait for a free one.

Otherwise the replica that claims first wins every due slot, runs ``max_workers`` of
them and queues the rest behind them, while other replicas sit idle. Started runners on
fake clocks stand for replicas; handlers block until the test lets them go.
"""

from __future__ import annotations

import threading
from typing import Any

import redis

from cronlock import CronRunner, FakeClock, IntervalSchedule, JobContext
from cronlock.testing import wait_until

T0 = 1_800_000_000.0  # a multiple of 3600 s


class Blocking:
    """Handlers that note who runs what and block until released."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[tuple[str, str]] = []  # (runner name, job key)
        self.release = threading.Event()

    def handler(self, name: str) -> Any:
        def run(ctx: JobContext) -> None:
            with self.lock:
                self.runs.append((name, ctx.key))
            self.release.wait(10)

        return run


def _runner(
    client: redis.Redis, prefix: str, clock: FakeClock, blocking: Blocking, name: str
) -> CronRunner:
    """A replica with two workers and four hourly jobs, all due now."""
    runner = CronRunner(client, prefix=prefix, clock=clock, max_workers=2, default_ttl=30)
    for i in range(4):
        runner.add_job(blocking.handler(name), IntervalSchedule(3600), key=f"job{i}", catch_up=60)
    return runner


def test_due_slots_spread_over_replicas_by_their_idle_workers(client: redis.Redis) -> None:
    """4 slots due at once, two replicas of 2 workers each: each runs 2, none queues."""
    prefix = f"cap-a-{id(client)}"
    blocking = Blocking()
    clock = FakeClock(T0 + 0.5)
    a = _runner(client, prefix, clock, blocking, "a")
    b = _runner(client, prefix, clock, blocking, "b")
    try:
        a.start()
        wait_until(lambda: len(blocking.runs) == 2, timeout=5)  # a's two workers are busy
        b.start()
        wait_until(lambda: len(blocking.runs) == 4, timeout=5)
    finally:
        blocking.release.set()
        for runner in (a, b):
            runner.stop(timeout=5)
    assert sorted(key for _, key in blocking.runs) == ["job0", "job1", "job2", "job3"]
    assert sorted(name for name, _ in blocking.runs) == ["a", "a", "b", "b"]


def _lone_runner(
    client: redis.Redis, prefix: str, clock: FakeClock, blocking: Blocking, *, catch_up: float
) -> CronRunner:
    """A runner with one worker and two hourly jobs, both due now."""
    runner = CronRunner(client, prefix=prefix, clock=clock, max_workers=1, default_ttl=30)
    for i in range(2):
        runner.add_job(
            blocking.handler("a"), IntervalSchedule(3600), key=f"job{i}", catch_up=catch_up
        )
    return runner


def test_a_lone_runner_runs_waiting_slots_as_workers_free_up(client: redis.Redis) -> None:
    """One worker, two slots due: the second is claimed and run when the first ends."""
    prefix = f"cap-b-{id(client)}"
    blocking = Blocking()
    runner = _lone_runner(client, prefix, FakeClock(T0 + 0.5), blocking, catch_up=60)
    try:
        runner.start()
        wait_until(lambda: len(blocking.runs) == 1, timeout=5)
        assert client.hget(f"{prefix}:job:{{job1}}", "status") is None  # not claimed yet
        blocking.release.set()
        wait_until(lambda: len(blocking.runs) == 2, timeout=5)
    finally:
        blocking.release.set()
        runner.stop(timeout=5)
    assert [key for _, key in blocking.runs] == ["job0", "job1"]
    assert runner.statistics().slots_no_worker == 0


def test_a_slot_no_worker_was_free_for_within_catch_up_is_left(client: redis.Redis) -> None:
    """One worker busy past the second slot's catch-up: that slot is not claimed here."""
    prefix = f"cap-c-{id(client)}"
    blocking = Blocking()
    clock = FakeClock(T0 + 0.5)
    runner = _lone_runner(client, prefix, clock, blocking, catch_up=5)
    try:
        runner.start()
        wait_until(lambda: len(blocking.runs) == 1, timeout=5)
        clock.set(T0 + 10)  # past catch-up (5 s) and the scheduling slack (1 s)
        blocking.release.set()
        wait_until(lambda: runner.statistics().slots_no_worker == 1, timeout=5)
    finally:
        blocking.release.set()
        runner.stop(timeout=5)
    assert [key for _, key in blocking.runs] == ["job0"]
    assert client.hget(f"{prefix}:job:{{job1}}", "status") is None


def test_each_freed_worker_takes_the_next_waiting_claim(client: redis.Redis) -> None:
    """Four workers, three held by long runs: short slots waiting behind them run one by
    one in the one free worker, not when many workers are free."""
    prefix = f"cap-d-{id(client)}"
    blocking = Blocking()
    quick: list[str] = []
    runner = CronRunner(client, prefix=prefix, clock=FakeClock(T0 + 0.5), max_workers=4)
    for i in range(3):
        runner.add_job(blocking.handler("a"), IntervalSchedule(3600), key=f"long{i}")
    for i in range(3):
        runner.add_job(quick.append, IntervalSchedule(3600), key=f"quick{i}", args=(f"q{i}",))
    try:
        runner.start()
        wait_until(lambda: len(quick) == 3, timeout=5)
        assert len(blocking.runs) == 3  # the long runs are still going
    finally:
        blocking.release.set()
        runner.stop(timeout=5)
    assert quick == ["q0", "q1", "q2"]
