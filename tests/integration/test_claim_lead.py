"""A started runner claims a slot a few ms early; the handler still starts at the boundary.

The scheduler thread sends the claim ``CLAIM_LEAD_MS`` before the slot, so the claim's
round trip is not part of the handler's start delay. Each test holds a started runner's
fake clock just before a boundary: the claim is sent, and the test sees what may and may
not happen before the clock reaches the slot.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import redis

from cronlock import CronRunner, FakeClock, IntervalSchedule, JobContext
from cronlock._keys import job_key
from cronlock.runner.scheduler import CLAIM_LEAD_MS
from cronlock.stores.redis.claims import ClaimRequest, claim, finish
from cronlock.testing import wait_until

T0 = 1_800_000_000.0  # a multiple of 10 s
SLOT_MS = int((T0 + 10) * 1000)
EARLY = T0 + 10 - CLAIM_LEAD_MS / 1000 / 2  # within the lead, before the boundary


def _runner(client: redis.Redis, prefix: str, clock: FakeClock, runs: list[Any]) -> CronRunner:
    runner = CronRunner(client, prefix=prefix, clock=clock, default_ttl=30)

    def handler(ctx: JobContext) -> None:
        runs.append((ctx.slot_ms, ctx.attempt, clock.time()))

    runner.add_job(handler, IntervalSchedule(10), key="job", catch_up=0)
    return runner


def _state(client: redis.Redis, prefix: str) -> dict[str, str]:
    raw = client.hgetall(job_key(prefix, "job"))
    return {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes)
            else v for k, v in raw.items()}  # fmt: skip


def test_the_claim_is_early_but_the_handler_waits_for_the_boundary(client: redis.Redis) -> None:
    """Won before the boundary; the handler starts only once the clock reaches the slot."""
    prefix = f"lead-a-{id(client)}"
    runs: list[Any] = []
    clock = FakeClock(EARLY)
    runner = _runner(client, prefix, clock, runs).start()
    try:
        wait_until(lambda: _state(client, prefix).get("status") == "running", timeout=5)
        assert _state(client, prefix)["slot"] == str(SLOT_MS)
    except BaseException:
        runner.stop(timeout=5)
        raise
    assert _runs_at_the_boundary(runner, clock, runs) == (SLOT_MS, 1)


def _runs_at_the_boundary(runner: CronRunner, clock: FakeClock, runs: list[Any]) -> Any:
    """The won run waits while the fake clock stays before the boundary and runs once it
    reaches it; its (slot, attempt). Stops the runner."""
    try:
        threading.Event().wait(0.1)  # the worker is waiting; the fake clock has not moved
        assert runs == []
        clock.set(T0 + 10)
        wait_until(lambda: runs, timeout=5)
    finally:
        runner.stop(timeout=5)
    [(slot, attempt, started)] = runs
    assert started >= T0 + 10
    return slot, attempt


def test_an_early_busy_answer_is_asked_again_at_the_boundary(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The previous run ends after the early claim but before the boundary: the slot runs.

    Claimed early, the slot is busy (overlap "skip": the previous slot's run holds a live
    lease). That run then ends before the boundary, so a claim at the boundary would have
    won; the runner asks again at the boundary and runs it.
    """
    prefix = f"lead-b-{id(client)}"
    previous = ClaimRequest(job_key(prefix, "job"), SLOT_MS - 10_000, "other", 30_000, 3, "skip",
                            "elsewhere:1:x")  # fmt: skip
    assert claim(client, previous).status == "won"
    runs: list[Any] = []
    clock = FakeClock(EARLY)
    caplog.set_level(logging.DEBUG, logger="cronlock")
    runner = _runner(client, prefix, clock, runs).start()
    try:
        wait_until(lambda: "busy before its boundary" in caplog.text, timeout=5)
        assert runs == []
        assert finish(client, previous.state_key, previous.slot_ms, "other", "done")
        clock.set(T0 + 10 + 0.001)
        wait_until(lambda: runs, timeout=5)
    finally:
        runner.stop(timeout=5)
    assert [(s, a) for s, a, _ in runs] == [(SLOT_MS, 1)]
    assert runner.statistics().claims_skipped == 0


def test_a_stop_before_the_boundary_hands_the_slot_back_unrun(client: redis.Redis) -> None:
    """Stopped between the early claim and the boundary: the handler never runs and the
    lease ends at once, so another replica can take the slot."""
    prefix = f"lead-c-{id(client)}"
    runs: list[Any] = []
    clock = FakeClock(EARLY)
    runner = _runner(client, prefix, clock, runs).start()
    # The claim is in Redis; its run may or may not have reached a worker yet (the
    # scheduler thread launches it after the reply): either way stop() hands it back.
    wait_until(lambda: _state(client, prefix).get("status") == "running", timeout=5)
    runner.stop(timeout=5)
    assert runs == []
    state = _state(client, prefix)
    server_ms = int(client.time()[0]) * 1000
    assert int(state["lease"]) <= server_ms + 1000  # handed over, not held for the 30 s ttl


def test_a_claim_won_while_stopping_is_handed_over_not_run(client: redis.Redis) -> None:
    """stop() lands between a claim's reply and its launch: the run never starts and its
    lease ends at once (before, it ran in a worker after stop() had returned)."""
    prefix = f"lead-d-{id(client)}"
    runs: list[Any] = []
    clock = FakeClock(T0 + 10 + 0.001)  # the slot is due: no early claim, no wait
    stopper: list[threading.Thread] = []

    class StopOnWin:
        def claimed(self, key: str, slot_ms: int, status: str, runner_id: str) -> None:
            if status == "won" and not stopper:  # the scheduler thread, before _launch
                stopping = threading.Thread(target=runner.stop, kwargs={"timeout": 5})
                stopping.start()  # before it is visible: the test joins what it sees
                stopper.append(stopping)
                wait_until(lambda: runner._stopping, timeout=5)

    runner = CronRunner(client, prefix=prefix, clock=clock, default_ttl=30, observers=[StopOnWin()])
    runner.add_job(
        lambda ctx: runs.append(ctx.slot_ms), IntervalSchedule(10), key="job", catch_up=5
    )
    runner.start()
    wait_until(lambda: bool(stopper), timeout=5)
    stopper[0].join(10)
    assert not runner.running
    threading.Event().wait(0.2)  # a run handed to a worker would have started by now
    assert runs == []
    state = _state(client, prefix)
    assert state["status"] == "running"  # handed over, not finished: another replica runs it
    assert int(state["lease"]) <= int(client.time()[0]) * 1000 + 1000


def test_a_slot_handed_over_before_its_boundary_starts_at_the_boundary(
    client: redis.Redis,
) -> None:
    """Another replica won the slot early and handed it over before the boundary (its
    worker was recycled): this runner takes it over at once, yet the handler still waits
    for the boundary (it once started up to the spread window early)."""
    prefix = f"lead-e-{id(client)}"
    other = ClaimRequest(
        job_key(prefix, "job"), SLOT_MS, "other", 30_000, 3, "skip", "elsewhere:1:x"
    )
    assert claim(client, other).status == "won"
    runs: list[Any] = []
    clock = FakeClock(EARLY)
    runner = _runner(client, prefix, clock, runs).start()
    try:
        wait_until(lambda: runner.statistics().claims_lost == 1, timeout=5)  # told "taken"
        assert finish(client, other.state_key, SLOT_MS, "other", "handover")
        runner.store.publish({"type": "handover", "key": "job", "slot": SLOT_MS})
        wait_until(lambda: _state(client, prefix).get("attempt") == "2", timeout=5)  # ours now
    except BaseException:
        runner.stop(timeout=5)
        raise
    assert _runs_at_the_boundary(runner, clock, runs) == (SLOT_MS, 2)
