"""Pause, resume, pause-all and trigger across runners sharing one server.

Runners in one process stand for replicas (stepped with ``run_pending`` and ``sync``
on fake clocks); the last tests use started runners, so pub/sub delivers the trigger.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from cronlock import Admin, CronRunner, FakeClock, JobContext
from cronlock.testing import wait_until

T0 = 1_800_000_000.0
PREFIX = "s"


def replica(
    client: redis.Redis, runs: list[Any], key: str = "job", seconds: int = 10, **kw: Any
) -> CronRunner:
    """A runner with one job (every 10 s) recording (runner id, slot, fence)."""
    kw.setdefault("clock", FakeClock(T0))
    runner = CronRunner(client, prefix=PREFIX, default_ttl=5, **kw)

    @runner.interval(seconds=seconds, key=key, catch_up=3)
    def job(ctx: JobContext) -> None:
        runs.append((runner.runner_id, ctx.slot_ms, ctx.fencing_token))

    return runner


def at(runner: CronRunner, n: int) -> None:
    assert isinstance(runner.clock, FakeClock)
    runner.clock.set(T0 + n * 10 + 0.001)
    runner.run_pending()


def test_pause_on_one_replica_is_honoured_by_another(client: redis.Redis) -> None:
    """A pause written through one runner stops the claims of another; resume restarts them."""
    runs: list[Any] = []
    a, b = replica(client, runs), replica(client, runs)
    a.pause("job")
    at(b, 0)
    assert runs == []
    assert b.statistics().claims_paused == 1
    assert Admin(client, PREFIX).job("job").paused
    b.resume("job")
    at(b, 1)
    assert [r[1] for r in runs] == [int((T0 + 10) * 1000)]


def test_pause_survives_a_runner_restart(client: redis.Redis) -> None:
    """The flag lives in Redis: a runner created afterwards is paused as well."""
    runs: list[Any] = []
    Admin(client, PREFIX).pause("job")
    fresh = replica(client, runs)
    at(fresh, 0)
    assert runs == []


def test_pause_all_covers_registered_and_later_jobs(client: redis.Redis) -> None:
    """pause_all pauses every registered job and jobs first registered while it is set."""
    runs: list[Any] = []
    a = replica(client, runs, key="one")
    a.sync()  # registers "one"
    admin = Admin(client, PREFIX)
    assert admin.pause_all() == 1
    b = replica(client, runs, key="two")
    b.sync()  # "two" is new while pause-all is set
    at(a, 0)
    at(b, 0)
    assert runs == []
    assert {j.key: j.paused for j in admin.jobs()} == {"one": True, "two": True}
    assert admin.status().pause_all
    assert admin.resume_all() == 2
    at(a, 1)
    at(b, 1)
    assert len(runs) == 2


def test_trigger_runs_once_among_replicas(client: redis.Redis) -> None:
    """Three replicas look for the trigger; exactly one runs it, as a manual slot."""
    runs: list[Any] = []
    replicas = [replica(client, runs) for _ in range(3)]
    for r in replicas:
        r.sync()
    request = Admin(client, PREFIX).trigger("job")
    for r in replicas:
        r.sync()
    assert len(runs) == 1
    history = Admin(client, PREFIX).history("job")
    assert [(e.event, e.kind, e.trigger_id) for e in history] == [
        ("succeeded", "manual", None),
        ("running", "manual", request),
    ]
    assert history[1].slot is not None
    assert history[1].slot.timestamp() * 1000 == runs[0][1]


def test_scheduled_slots_continue_beside_a_trigger(client: redis.Redis) -> None:
    """A manual run does not consume or block the scheduled slot sequence."""
    runs: list[Any] = []
    r = replica(client, runs)
    at(r, 0)
    r.sync()  # registers the job: a runner driven by run_pending() does it here
    r.trigger("job")
    r.sync()
    at(r, 1)
    slots = [s for _, s, _ in runs]
    assert slots[0] == int(T0 * 1000)
    assert slots[2] == int((T0 + 10) * 1000)
    fences = [f for _, _, f in runs]
    assert fences == sorted(fences)
    assert len(set(fences)) == 3


def test_trigger_respects_pause_and_overlap_unless_forced(client: redis.Redis) -> None:
    """Paused once queued, or a live run under overlap "skip": dropped with a "skipped"
    entry; force runs."""
    runs: list[Any] = []
    r = replica(client, runs)
    admin = Admin(client, PREFIX)
    r.sync()
    admin.trigger("job")
    admin.pause("job")  # after the request was queued: the replica drops it
    r.sync()
    assert runs == []
    assert admin.history("job", limit=1)[0].reason == "paused"
    admin.trigger("job", force=True)
    r.sync()
    assert len(runs) == 1
    admin.resume("job")
    # a run of another replica that holds a live lease
    gate = threading.Event()
    other = CronRunner(client, prefix=PREFIX, clock=FakeClock(T0), default_ttl=30)

    @other.interval(seconds=10, key="job", catch_up=3)
    def hold(ctx: JobContext) -> None:
        gate.wait(10)

    worker = threading.Thread(target=lambda: at(other, 5))
    worker.start()
    try:
        wait_until(lambda: admin.job("job").status == "running")
        admin.trigger("job")
        r.sync()
        assert len(runs) == 1
        assert admin.history("job", limit=1)[0].reason == "busy"
        admin.trigger("job", force=True)
        r.sync()
        assert len(runs) == 2
    finally:
        gate.set()
        worker.join(10)


def test_trigger_of_an_unknown_job_is_refused(client: redis.Redis) -> None:
    """Nothing would run it, so trigger() raises KeyError instead of queueing it forever."""
    with pytest.raises(KeyError, match="nope"):
        Admin(client, PREFIX).trigger("nope")


def test_a_started_fleet_runs_a_trigger_within_seconds(client: redis.Redis) -> None:
    """With polling at 60 s, only pub/sub can deliver the trigger this fast; one replica runs it."""
    runs: list[Any] = []
    fleet = [
        replica(client, runs, key="hourly", seconds=3600, poll_interval=60, clock=None)
        for _ in range(2)
    ]
    for r in fleet:
        r.start()
    try:
        admin = Admin(client, PREFIX)
        wait_until(lambda: len(admin.runners()) == 2 and all(r._ops.listening for r in fleet))
        admin.trigger("hourly")
        wait_until(lambda: len(runs) == 1, timeout=10)
        wait_until(lambda: admin.history("hourly", limit=1)[0].event == "succeeded")
    finally:
        for r in fleet:
            r.stop(timeout=5)
    assert len(runs) == 1
