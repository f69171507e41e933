"""Winners spread over the replicas by default, and the lease heartbeat is an option.

Without jitter, every replica used to claim a slot at the same moment of its own clock,
so the replica whose clock ran earliest (or whose thread woke first) won every slot.
Each replica now claims at a random point of a short window before the boundary
(``CLAIM_SPREAD_MS``), and the handler still starts at the boundary.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
import redis

from cronlock import (
    ConfigurationError,
    CronRunner,
    FakeClock,
    IntervalSchedule,
    JobContext,
    OffsetClock,
)
from cronlock.testing import RedisServer, wait_until

SLOTS = 100


@pytest.mark.slow
def test_four_replicas_share_100_slots_no_one_wins_more_than_half(
    redis_server: RedisServer,
) -> None:
    """4 started runners (threads, one private Redis) whose clocks differ by 1 ms steps, as
    NTP-synchronised hosts' do, on a 0.1 s job: each of 100 consecutive slots runs once,
    and no replica wins more than 50 of them (before, the earliest clock won them all)."""
    lock = threading.Lock()
    winners: dict[int, str] = {}
    duplicates: list[int] = []
    clients = [redis.Redis.from_url(redis_server.url, socket_timeout=5) for _ in range(4)]
    clients[0].flushdb()
    runners = []
    for i, client in enumerate(clients):
        runner = CronRunner(client, prefix="spread", default_ttl=2, clock=OffsetClock(i * 0.001))

        def handler(ctx: JobContext, name: str = f"r{i}") -> None:
            with lock:
                if ctx.slot_ms in winners:
                    duplicates.append(ctx.slot_ms)
                winners[ctx.slot_ms] = name

        runner.add_job(handler, IntervalSchedule(0.1), key="tick", catch_up=0)
        runners.append(runner)
    try:
        for runner in runners:
            runner.start()
        wait_until(lambda: len(winners) >= SLOTS + 2, timeout=SLOTS * 0.1 + 20)
    finally:
        for runner in runners:
            runner.stop(timeout=5)
        for client in clients:
            client.close()
    slots = sorted(winners)[1 : SLOTS + 1]  # the first slot may have begun before a start()
    assert duplicates == []
    assert [b - a for a, b in zip(slots, slots[1:])] == [100] * (SLOTS - 1)  # none missed
    wins = Counter(winners[s] for s in slots)
    assert max(wins.values()) <= SLOTS // 2, wins


def test_run_pending_never_claims_a_slot_within_the_spread_window(client: redis.Redis) -> None:
    """Stepped by hand, a runner claims a slot only once its clock has reached it."""
    clock = FakeClock(1_800_000_000.0 + 9.999)  # 1 ms before a 10 s boundary
    runner = CronRunner(client, prefix="spread-step", clock=clock, default_ttl=5)
    runs: list[int] = []
    runner.add_job(
        lambda ctx: runs.append(ctx.slot_ms), IntervalSchedule(10), key="job", catch_up=0
    )
    assert runner.run_pending() == 0
    assert runs == []
    clock.advance(0.002)
    assert runner.run_pending() == 1
    assert runs == [1_800_000_010_000]


def test_the_heartbeat_is_an_option_checked_against_the_lease(client: redis.Redis) -> None:
    """``heartbeat`` sets the renewal interval (default ttl/3); more than half the ttl is
    refused before anything is written, naming the value and the ttl."""
    runner = CronRunner(client, prefix="hb-opt")
    job = runner.add_job(lambda: None, IntervalSchedule(10), key="a", ttl=30, heartbeat=2)
    assert job.options.renew_every_ms == 2000
    default = runner.add_job(lambda: None, IntervalSchedule(10), key="b", ttl=30)
    assert default.options.renew_every_ms == 10_000
    delta = runner.add_job(
        lambda: None, IntervalSchedule(10), key="c", ttl=30, heartbeat=timedelta(seconds=15)
    )
    assert delta.options.renew_every_ms == 15_000
    for bad, match in [
        (16, r"heartbeat of job 'd' must be at most half its ttl \(30 s\).*got 16"),
        (0, r"heartbeat of job 'd'.*got 0"),
        (-1, r"heartbeat of job 'd'.*got -1"),
        ("2", r"heartbeat of job 'd'.*'2'"),
    ]:
        with pytest.raises((ConfigurationError, TypeError), match=match):
            runner.add_job(lambda: None, IntervalSchedule(10), key="d", ttl=30, heartbeat=bad)
    assert "d" not in [j.key for j in runner.jobs]
    assert client.keys("hb-opt*") == []


def test_a_run_renews_at_its_heartbeat(client: redis.Redis) -> None:
    """A run with ``heartbeat=0.1`` and a 10 s lease renews several times within 0.5 s."""
    clock = FakeClock(1_800_000_000.001)
    runner = CronRunner(client, prefix="hb-run", clock=clock)
    leases: list[int] = []
    release = threading.Event()

    def handler(ctx: JobContext) -> Any:
        state = "hb-run:job:{job}"
        for _ in range(5):
            release.wait(0.1)
            leases.append(int(client.hget(state, "lease") or 0))

    runner.add_job(handler, IntervalSchedule(10), key="job", ttl=10, heartbeat=0.1)
    assert runner.run_pending() == 1
    assert len(set(leases)) >= 3, leases  # moved on by renewals every 0.1 s
