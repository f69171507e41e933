"""A loser's re-check of a slot that runs elsewhere: dropped once the slot is settled.

A replica told ``taken`` queues a re-check at the holder's lease end (how a crashed
owner's slot is taken over). When its claim of the job's next slot was recorded first,
the re-check could only answer ``stale``, so it is not sent. Driven step by step with a
fake clock on every store.
"""

from __future__ import annotations

from typing import Any

from cronlock import CronRunner, FakeClock, JobContext
from cronlock.stores import ClaimReply, Store
from cronlock.stores.types import NO_RETENTION, FinishInfo, SlotClaim
from cronlock.testing import wait_until

T0 = 1_800_000_000.0  # a multiple of 10 s
SLOT1 = int(T0 * 1000)


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
