"""Many claims in one EVALSHA on a standalone server: each keeps its own reply or error."""

from __future__ import annotations

import uuid

import redis
from redis.exceptions import ResponseError

from cronlock.stores.redis.claims import ClaimRequest, HistoryOptions, claim_many
from cronlock.stores.types import ClaimStatus
from tests.writes import counting_commands


class Jobs:
    """Claim requests for jobs of a fresh namespace (one per test)."""

    def __init__(self) -> None:
        self.ns = uuid.uuid4().hex[:8]

    def history(self, i: int) -> str:
        return f"{self.ns}:history:{{b{i}}}"

    def request(self, i: int, owner: str = "me", slot: int = 1_000) -> ClaimRequest:
        history = HistoryOptions(self.history(i), 10, 0)
        state = f"{self.ns}:job:{{b{i}}}"
        return ClaimRequest(state, slot, f"{owner}{i}", 5_000, 1, "skip", "h", history)


def test_a_batch_is_one_script_call_with_every_reply_in_place(client: redis.Redis) -> None:
    jobs = Jobs()
    claim_many(client, [jobs.request(90), jobs.request(91)])  # loads the script
    seen = counting_commands(client)
    first = claim_many(client, [jobs.request(i) for i in range(5)])
    again = claim_many(
        client, [jobs.request(0), jobs.request(1, "rival"), jobs.request(2, slot=500)]
    )
    assert [r.status for r in first] == [ClaimStatus.WON] * 5
    assert [r.status for r in again] == [ClaimStatus.WON, ClaimStatus.TAKEN, ClaimStatus.STALE]
    assert again[0].attempt == 1  # our own claim again: the same attempt
    assert seen == []  # the lean path: nothing through redis-py's command path


def test_one_claim_that_errors_fails_alone(client: redis.Redis) -> None:
    jobs = Jobs()
    client.set(jobs.history(7), "not a stream")  # this claim's XADD will fail
    replies = claim_many(client, [jobs.request(6), jobs.request(7), jobs.request(8)])
    assert replies[0].status == ClaimStatus.WON
    assert isinstance(replies[1], ResponseError)
    assert "WRONGTYPE" in str(replies[1])
    assert replies[2].status == ClaimStatus.WON
