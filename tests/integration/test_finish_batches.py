"""Finishes from many threads at once, coalesced into shared round trips on a real Redis:
each caller still learns whether the slot was its own."""

from __future__ import annotations

import threading

import redis

from cronlock.stores.redis.store import RedisStore
from cronlock.stores.types import ClaimStatus, FinishInfo, Retention, SlotClaim
from tests.stores import fresh_prefix

KEEP = Retention(max_entries=10)


def test_concurrent_finishes_each_get_their_own_answer(client: redis.Redis) -> None:
    store = RedisStore(client, prefix=fresh_prefix())
    claims = [
        SlotClaim(f"job{i}", 1_000, f"owner{i}", 30_000, 1, "skip", "h:1:r", KEEP)
        for i in range(40)
    ]
    assert {r.status for r in store.claim_slots(claims)} == {ClaimStatus.WON}  # type: ignore[union-attr]
    answers: dict[int, bool] = {}
    go = threading.Barrier(40)

    def finish(i: int) -> None:
        owner = f"owner{i}" if i % 2 == 0 else "someone-else"  # odd ones are not ours
        go.wait(10)
        answers[i] = store.finish(
            f"job{i}", 1_000, owner, "done", retention=KEEP, info=FinishInfo()
        )

    threads = [threading.Thread(target=finish, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert answers == {i: i % 2 == 0 for i in range(40)}
    states = store.job_states([f"job{i}" for i in range(40)])
    assert [s.fields.get("status") for s in states] == ["done", "running"] * 20
