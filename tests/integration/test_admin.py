"""Admin from a process with no runner: job status, runners, health, and the operations
thread surviving a Redis restart."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any, Callable

import pytest
import redis

from cronlock import Admin, CronRunner, FakeClock, JobContext
from cronlock.testing import RedisServer, wait_until

PREFIX = "a"


def test_jobs_lists_registered_jobs_with_schedule_and_next_run(client: redis.Redis) -> None:
    """After a runner registered its jobs, Admin knows their schedule and next run."""
    runner = CronRunner(client, prefix=PREFIX)
    runner.cron("0 3 * * *", key="nightly", timezone="Europe/Athens")(lambda: None)
    runner.interval(seconds=30, key="half-minute")(lambda: None)
    runner.sync()
    jobs = {j.key: j for j in Admin(client, PREFIX).jobs()}
    assert set(jobs) == {"nightly", "half-minute"}
    assert jobs["nightly"].schedule == "cron '0 3 * * *' in Europe/Athens"
    nxt = jobs["half-minute"].next_run
    assert nxt is not None
    assert nxt.second in (0, 30)
    assert nxt > datetime.now(timezone.utc)
    assert jobs["nightly"].status is None
    assert jobs["nightly"].registered


def test_a_running_job_shows_its_holder_and_lease(client: redis.Redis) -> None:
    """While a slot runs, job() names the holder and when its lease ends."""
    gate, entered = threading.Event(), threading.Event()
    runner = CronRunner(client, prefix=PREFIX, clock=FakeClock(1_800_000_000.0), default_ttl=30)

    @runner.interval(seconds=10, key="busy")
    def busy(ctx: JobContext) -> None:
        entered.set()
        gate.wait(10)

    runner.sync()
    worker = threading.Thread(target=runner.run_pending)
    worker.start()
    try:
        assert entered.wait(10)
        status = Admin(client, PREFIX).job("busy")
        assert status.status == "running"
        assert status.holder == runner.holder
        assert status.lease_until is not None
        assert status.attempt == 1
        assert Admin(client, PREFIX).status().running == 1
    finally:
        gate.set()
        worker.join(10)
    assert Admin(client, PREFIX).job("busy").status == "done"


def test_job_of_an_unknown_key_raises_key_error(client: redis.Redis) -> None:
    """job() of a key nobody registered and that never ran is a KeyError."""
    with pytest.raises(KeyError, match="ghost"):
        Admin(client, PREFIX).job("ghost")


def test_forget_drops_state_history_and_registry(client: redis.Redis) -> None:
    """forget() removes every trace of a job deleted from the code."""
    runner = CronRunner(client, prefix=PREFIX, clock=FakeClock(1_800_000_000.0))
    runner.interval(seconds=10, key="old")(lambda: None)
    runner.sync()
    runner.run_pending()
    admin = Admin(client, PREFIX)
    assert admin.history("old")
    assert admin.forget("old") is True
    assert admin.jobs() == []
    assert admin.history("old") == []


def test_runners_lists_live_runners_and_drops_stopped_ones(client: redis.Redis) -> None:
    """A started runner's heartbeat names it and its jobs; stop() removes it."""
    runner = CronRunner(client, prefix=PREFIX)
    runner.interval(seconds=3600, key="hourly")(lambda: None)
    runner.start()
    admin = Admin(client, PREFIX)
    try:
        live = wait_until(admin.runners)
        assert [r.id for r in live] == [runner.runner_id]
        assert live[0].jobs == ("hourly",)
        assert live[0].holder == runner.holder
        assert live[0].ttl is not None
        assert live[0].ttl > 0
        assert live[0].as_dict()["jobs"] == ["hourly"]
    finally:
        runner.stop(timeout=5)
    assert admin.runners() == []


def test_health_reports_redis_and_scheduler(
    server_factory: Callable[..., RedisServer],
) -> None:
    """Not started: not ok; started: ok; Redis gone: not ok, with the reason."""
    server = server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=1, socket_connect_timeout=1)
    runner = CronRunner(client, prefix=PREFIX)
    before = runner.health()
    assert not before.ok
    assert before.redis
    assert not before.scheduler_alive
    runner.start()
    try:
        report = wait_until(lambda: (h := runner.health()).ok and h.listening and h)
        assert report.redis_latency_ms is not None
        assert report.as_dict()["problems"] == []
        server.kill()
        down = runner.health()
        assert not down.ok
        assert not down.redis
        assert any("Redis" in p for p in down.problems)
    finally:
        runner.stop(timeout=5)


def test_the_operations_thread_survives_a_redis_restart(
    server_factory: Callable[..., RedisServer],
) -> None:
    """After the server restarts (empty), the runner re-subscribes, re-registers and
    still runs a trigger delivered by pub/sub."""
    server = server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=1, socket_connect_timeout=1)
    runs: list[Any] = []
    runner = CronRunner(client, prefix=PREFIX, poll_interval=0.5)
    runner.interval(seconds=3600, key="hourly")(lambda: runs.append(1))
    runner.start()
    admin = Admin(redis.Redis.from_url(server.url), PREFIX)
    try:
        wait_until(lambda: runner._ops.listening and admin.jobs())
        server.restart()
        wait_until(lambda: admin.jobs() and runner._ops.listening, timeout=20, interval=0.1)
        assert runner._ops.alive
        admin.trigger("hourly")
        wait_until(lambda: runs, timeout=10)
    finally:
        runner.stop(timeout=5)
