"""Read first: a tick's claims as plain reads, so that a loser runs no script.

A claim script costs the server 11-13 µs even when it only answers ``taken``; the
same answer read with a plain ``HMGET`` costs about 2 µs (``bench/server_cost.py``).
In a fleet every replica claims every slot and all but one lose, so the runner asks the
store to read the states of jobs whose slots lately went elsewhere
(`RedisStore.read_claims`): each job's fields and the server's ``TIME``, in one round
trip. A read that already says what the script would answer with nothing written
(`answer`: ``paused``, ``stale``, ``done``, ``taken``) is that claim's reply; the others
are claimed as before. The script stays the only writer and judge: a read only ever
spares a call that would have changed nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from redis.exceptions import RedisError

from cronlock import _wire
from cronlock._scripts import text
from cronlock.stores.types import ClaimReply, ClaimStatus, SlotClaim

# The job hash's fields a read takes, in this order (see job_claim.lua).
FIELDS = ("slot", "status", "attempt", "owner", "lease", "paused")

_FIELDS = tuple(f.encode("ascii") for f in FIELDS)
_TIME = _wire.pack([b"TIME"])


def read_states(client: Any, keys: Sequence[str]) -> tuple[int, list[Any]]:
    """The server's time (ms) and each key's fields (`FIELDS`), or an error in its place,
    in one round trip."""
    pool = _wire.lean_pool(client)
    if pool is not None:
        packed = [_TIME] + [_wire.pack([b"HMGET", key.encode("utf-8"), *_FIELDS]) for key in keys]
        replies = _wire.call_many(pool, packed)
    else:
        pipe = client.pipeline(transaction=False)
        pipe.time()
        for key in keys:
            pipe.hmget(key, *FIELDS)
        replies = list(pipe.execute(raise_on_error=False))
    now = replies[0]
    if isinstance(now, BaseException):
        raise now
    return _time_ms(now), replies[1:]


def _time_ms(reply: Any) -> int:
    """``TIME`` as ms, whether redis-py parsed it (a tuple of ints) or not (two strings)."""
    seconds, micros = reply
    return int(text(seconds)) * 1000 + int(text(micros)) // 1000


def answer(claim: SlotClaim, state: Any, now_ms: int) -> Optional[ClaimReply]:
    """What ``claim`` would be answered, if the read ``state`` already says it; else None.

    Mirrors the script's order (job_claim.lua) for the answers that write nothing.
    """
    if isinstance(state, RedisError) or not isinstance(state, (list, tuple)):
        return None  # another type (the script answers ``corrupt``), or a failed read
    slot, status, attempt, owner, lease, paused = (None if v is None else text(v) for v in state)
    if paused == "1":
        return ClaimReply(ClaimStatus.PAUSED)
    if slot is None or not slot.isdigit():
        return None
    if claim.slot_ms != int(slot):
        return ClaimReply(ClaimStatus.STALE, detail=slot) if claim.slot_ms < int(slot) else None
    if status != "running":
        return ClaimReply(ClaimStatus.DONE, detail=status or "done")
    return _taken(claim, owner, lease, attempt, now_ms)


def _taken(
    claim: SlotClaim, owner: Optional[str], lease: Optional[str], attempt: Optional[str], now: int
) -> Optional[ClaimReply]:
    """``taken`` while another owner's lease is live. Not for a claim that asks to be woken
    (``wake``): the script notes that."""
    lease_ms = int(lease) if lease and lease.isdigit() else 0
    if owner == claim.owner or lease_ms <= now or claim.wake:
        return None
    return ClaimReply(
        ClaimStatus.TAKEN,
        lease_until_ms=lease_ms,
        attempt=int(attempt) if attempt and attempt.isdigit() else 0,
        server_now_ms=now,
    )
