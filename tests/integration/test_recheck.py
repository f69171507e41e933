"""A loser's re-check of a slot that runs elsewhere: dropped once the slot is settled.

A replica told ``taken`` queues a re-check at the holder's lease end (how a crashed
owner's slot is taken over). When its claim of the job's next slot was recorded first,
the re-check could only answer ``stale``, so it is not sent (step by step with a fake
clock, on every store); when the re-check would come first, the loser asks to be woken
and the holder's finish announces the slot (Redis pub/sub).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from cronlock import CronRunner, FakeClock, IntervalSchedule, JobContext
from cronlock.stores import ClaimReply, Store
from cronlock.stores.types import NO_RETENTION, FinishInfo, SlotClaim
from cronlock.testing import RedisServer, wait_until
from tests.stores import fresh_prefix, redis_store

T0 = 1_800_000_000.0  # a multiple of 10 s
SLOT1 = int(T0 * 1000)
INFO = FinishInfo()


def _holder_claims(store: Store, lease_ms: int) -> ClaimReply:
    """Another replica wins the first slot and holds it (never renews)."""
    [reply] = store.claim_slots(
        [SlotClaim("job", SLOT1, "holder", lease_ms, 3, "skip", "host:1:holder")]
    )
    assert isinstance(reply, ClaimReply), reply
    assert reply.status == "won", reply
    return reply


def _loser(store: Store, clock: FakeClock, runs: list[Any]) -> CronRunner:
    runner = CronRunner(store, clock=clock, default_ttl=30)

    @runner.interval(seconds=10, key="job", catch_up=3)
    def job(ctx: JobContext) -> None:
        runs.append((ctx.slot_ms, ctx.attempt))

    return runner


def test_a_recheck_of_a_slot_superseded_by_the_next_claim_is_not_sent(store: Store) -> None:
    """Taken, then the holder finishes, then the next slot is won here: no re-check."""
    _holder_claims(store, 25_000)
    runs: list[Any] = []
    clock = FakeClock(T0 + 0.001)
    loser = _loser(store, clock, runs)
    assert loser.run_pending() == 0  # taken: a re-check is queued at the lease's end
    assert store.finish("job", SLOT1, "holder", "done", retention=NO_RETENTION, info=FinishInfo())
    clock.set(T0 + 10.001)
    assert loser.run_pending() == 1  # the next slot, won: the store holds it now
    clock.set(T0 + 26)  # past the first slot's lease end: its re-check was due
    assert loser.run_pending() == 0
    stats = loser.statistics()
    assert (stats.rechecks, stats.rechecks_skipped) == (0, 1)
    assert runs == [(SLOT1 + 10_000, 1)]


def test_a_recheck_still_takes_over_a_slot_whose_owner_died(store: Store) -> None:
    """Taken, the next slot busy (the holder's lease still live): the re-check stays and
    takes the first slot over once the lease has lapsed."""
    _holder_claims(store, 25_000)
    runs: list[Any] = []
    clock = FakeClock(T0 + 0.001)
    loser = _loser(store, clock, runs)
    assert loser.run_pending() == 0  # taken
    clock.set(T0 + 10.001)
    assert loser.run_pending() == 0  # the next slot: busy, the holder's lease is live
    until = store.renew("job", SLOT1, "holder", 1)  # the holder's last renewal: 1 ms
    assert until is not None
    wait_until(lambda: store.time_ms() > until, timeout=5)  # the holder is gone
    clock.set(T0 + 26)  # past the lease end the loser learned: its re-check is due
    assert loser.run_pending() == 1
    stats = loser.statistics()
    assert (stats.claims_skipped, stats.rechecks, stats.rechecks_skipped) == (1, 1, 0)
    assert runs == [(SLOT1, 2)]


def _taken(store: Store, key: str, *, wake: bool) -> None:
    """A holder wins ``key``'s first slot; a loser is told ``taken`` (asking to be woken)."""
    claims = [
        SlotClaim(key, SLOT1, "holder", 25_000, 3, "skip", "host:1:holder"),
        SlotClaim(key, SLOT1, "loser", 25_000, 3, "skip", "host:2:loser", wake=wake),
    ]
    won, taken = store.claim_slots(claims[:1])[0], store.claim_slots(claims[1:])[0]
    assert isinstance(won, ClaimReply), won
    assert isinstance(taken, ClaimReply), taken
    assert (won.status, taken.status) == ("won", "taken")


def test_the_finish_of_a_watched_slot_is_announced_once(redis_server: RedisServer) -> None:
    """Only the finish of a slot whose loser asked to be woken publishes ``finished``."""
    store = redis_store(redis_server.url, fresh_prefix())
    events = store.subscribe()
    try:
        _taken(store, "quiet", wake=False)
        _taken(store, "watched", wake=True)
        for key in ("quiet", "watched"):
            assert store.finish(key, SLOT1, "holder", "done", retention=NO_RETENTION, info=INFO)
        store.publish({"type": "end"})  # pub/sub keeps order: everything before it came
        heard: list[Any] = []
        deadline = time.monotonic() + 10
        while len(heard) < 2 and time.monotonic() < deadline:
            event = events.get(1)  # None also for the subscription's own confirmation
            if event is not None:
                heard.append(event)
    finally:
        events.close()
    assert heard == [{"type": "finished", "key": "watched", "slot": SLOT1}, {"type": "end"}]


@pytest.mark.slow
def test_a_running_loser_drops_the_recheck_of_a_watched_slot_that_finished(
    redis_server: RedisServer,
) -> None:
    """An hourly job with a 2 s lease: the loser hears the finish, no re-check goes out."""
    store = redis_store(redis_server.url, fresh_prefix())
    schedule = IntervalSchedule(3600, offset=time.time() % 3600 - 1)  # a slot 1 s ago
    slot = schedule.latest_at_or_before(int(time.time() * 1000))
    assert slot is not None
    [won] = store.claim_slots([SlotClaim("job", slot, "holder", 2000, 3, "skip", "h:1:x")])
    assert isinstance(won, ClaimReply), won
    assert won.status == "won"
    loser = CronRunner(store, default_ttl=2)
    loser.add_job(lambda: None, schedule, key="job", catch_up=60)
    loser.start()
    try:
        wait_until(lambda: loser.statistics().claims_lost == 1, timeout=10)
        wait_until(lambda: loser.health().listening, timeout=10)
        assert store.finish("job", slot, "holder", "done", retention=NO_RETENTION, info=INFO)
        wait_until(lambda: loser.statistics().rechecks_skipped == 1, timeout=10)
    finally:
        loser.stop(timeout=5)
    assert loser.statistics().rechecks == 0
