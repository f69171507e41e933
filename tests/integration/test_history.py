"""Run history written by the claim and finish scripts, and the per-job summary fields.

Runners are stepped with ``run_pending`` and a fake clock against a real server; the
history stream and state hash are read back through ``Admin``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from cronlock import Admin, CronRunner, FakeClock, JobContext
from cronlock._keys import history_key, job_key
from cronlock.stores.redis.claims import ClaimRequest, HistoryOptions, claim

T0 = 1_800_000_000.0  # a multiple of 10 s
PREFIX = "h"


def make_runner(
    client: redis.Redis, clock: FakeClock, outcomes: list[str], **kw: Any
) -> CronRunner:
    """A runner with one 10 s job that fails while ``outcomes`` says "fail" next."""
    runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5, **kw)

    @runner.interval(seconds=10, key="job", catch_up=3)
    def job(ctx: JobContext) -> None:
        if outcomes and outcomes.pop(0) == "fail":
            raise RuntimeError("boom in the handler")

    return runner


def step(runner: CronRunner, clock: FakeClock, n: int) -> None:
    clock.set(T0 + n * 10 + 0.001)
    runner.run_pending()


def test_a_successful_run_writes_running_then_succeeded(client: redis.Redis) -> None:
    """A won slot adds "running" (claim) and "succeeded" (finish) with slot, fence, holder."""
    clock = FakeClock(T0)
    runner = make_runner(client, clock, [])
    step(runner, clock, 0)
    entries = Admin(client, PREFIX).history("job")
    assert [e.event for e in entries] == ["succeeded", "running"]
    end, start = entries
    slot = T0 * 1000
    for e in entries:
        assert e.slot is not None
        assert e.slot.timestamp() * 1000 == slot
        assert e.attempt == 1
        assert e.fencing_token == 1
        assert e.holder == runner.holder
        assert e.kind == "scheduled"
    assert start.started is not None
    assert end.finished is not None
    assert end.duration is not None
    assert end.duration >= 0
    assert end.error_type is None
    assert end.traceback is None


def test_a_failed_run_records_error_type_traceback_and_counts_failures(
    client: redis.Redis,
) -> None:
    """Failures are counted across slots; a success resets the count and is remembered."""
    clock = FakeClock(T0)
    runner = make_runner(client, clock, ["fail", "fail", "ok", "fail"], on_error=lambda e, c: None)
    admin = Admin(client, PREFIX)
    step(runner, clock, 0)
    last = admin.history("job", limit=1)[0]
    assert last.event == "failed"
    assert last.error_type == "RuntimeError"
    assert last.traceback is not None
    assert "boom in the handler" in last.traceback
    step(runner, clock, 1)
    status = admin.job("job")
    assert status.consecutive_failures == 2
    assert status.last_error == "RuntimeError"
    assert status.last_success is None
    assert status.last_failure_slot is not None
    assert status.last_failure_slot.timestamp() == T0 + 10
    step(runner, clock, 2)
    status = admin.job("job")
    assert status.consecutive_failures == 0
    assert status.last_success_slot is not None
    assert status.last_success_slot.timestamp() == T0 + 20
    step(runner, clock, 3)
    assert admin.job("job").consecutive_failures == 1


def test_a_takeover_records_the_lapsed_attempt(client: redis.Redis) -> None:
    """A lease that lapsed shows as "taken_over" (attempt 1), then "running" attempt 2."""
    slot = int(T0 * 1000)
    history = HistoryOptions(history_key(PREFIX, "job"), 100, 0)
    dead = ClaimRequest(job_key(PREFIX, "job"), slot, "dead", 50, 3, "skip", "dead:1:x", history)
    assert claim(client, dead).status == "won"
    time.sleep(0.1)  # Redis's own clock must pass the 50 ms lease
    clock = FakeClock(T0 + 0.5)
    runner = make_runner(client, clock, [])
    runner.run_pending()
    events = [(e.event, e.attempt, e.holder) for e in Admin(client, PREFIX).history("job")]
    assert events == [
        ("succeeded", 2, runner.holder),
        ("running", 2, runner.holder),
        ("taken_over", 1, "dead:1:x"),
        ("running", 1, "dead:1:x"),
    ]


def test_a_losing_claim_writes_no_history(client: redis.Redis) -> None:
    """Only state changes are recorded: a second replica losing the slot adds nothing."""
    clock_a, clock_b = FakeClock(T0), FakeClock(T0)
    a, b = make_runner(client, clock_a, []), make_runner(client, clock_b, [])
    step(a, clock_a, 0)
    before = client.xlen(history_key(PREFIX, "job"))
    step(b, clock_b, 0)
    assert client.xlen(history_key(PREFIX, "job")) == before == 2
    assert b.statistics().claims_lost == 1


def test_history_is_capped_by_count(client: redis.Redis) -> None:
    """``history_max=3`` keeps exactly the 3 newest entries."""
    clock = FakeClock(T0)
    runner = make_runner(client, clock, [], history_max=3)
    for n in range(5):
        step(runner, clock, n)
    entries = Admin(client, PREFIX).history("job")
    assert len(entries) == 3
    assert entries[0].event == "succeeded"
    assert entries[0].slot is not None
    assert entries[0].slot.timestamp() == T0 + 40


def test_history_is_capped_by_age(client: redis.Redis) -> None:
    """Entries older than ``history_max_age`` (server clock) are dropped at the next write."""
    clock = FakeClock(T0)
    runner = make_runner(client, clock, [], history_max_age=0.2)
    step(runner, clock, 0)
    time.sleep(0.3)
    step(runner, clock, 1)
    entries = Admin(client, PREFIX).history("job")
    assert [e.slot.timestamp() for e in entries if e.slot] == [T0 + 10, T0 + 10]


def test_history_can_be_switched_off(client: redis.Redis) -> None:
    """``history_max=0`` writes no stream; the summary fields are still kept."""
    clock = FakeClock(T0)
    runner = make_runner(client, clock, [], history_max=0)
    step(runner, clock, 0)
    assert client.exists(history_key(PREFIX, "job")) == 0
    assert client.hget(job_key(PREFIX, "job"), "failures") in (b"0", "0")


def test_history_options_are_validated(client: redis.Redis) -> None:
    """Negative or non-int retention is refused with ConfigurationError (a ValueError)."""
    with pytest.raises(ValueError, match="history_max"):
        CronRunner(client, history_max=-1)
    with pytest.raises(ValueError, match="history_max_age"):
        CronRunner(client, history_max_age=-5)
    with pytest.raises(ValueError, match="limit"):
        Admin(client).history("job", limit=0)


def test_a_graceful_stop_records_a_cancelled_run(client: redis.Redis) -> None:
    """A handler still running at stop() is handed over; history says "cancelled"."""
    entered, left = threading.Event(), threading.Event()
    runner = CronRunner(client, prefix=PREFIX, default_ttl=30)

    @runner.interval(seconds=1, key="slow", catch_up=1)
    def slow(ctx: JobContext) -> None:
        entered.set()
        time.sleep(1)  # ignores cancellation on purpose
        left.set()

    runner.start()
    try:
        assert entered.wait(10)
    finally:
        runner.stop(timeout=0.2)
    events = [e.event for e in Admin(client, PREFIX).history("slow")]
    assert left.wait(10)  # let the handler end before the server goes away
    # newest first; a handler that ends after the handover may still record its outcome
    assert events[-2:] == ["cancelled", "running"]
