"""Typed calls of the three job scripts: claim, renew, finish (one round trip each).

See ``cronlock/scripts/job_*.lua`` for each script's exact contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from cronlock._scripts import Script, execute_pipeline, text

CLAIM = Script("job_claim")
RENEW = Script("job_renew")
FINISH = Script("job_finish")

WON = "won"
TAKEN = "taken"
DONE = "done"
STALE = "stale"
BUSY = "busy"
EXHAUSTED = "exhausted"
PAUSED = "paused"
CORRUPT = "corrupt"


@dataclass(frozen=True)
class ClaimReply:
    """What the claim script answered; fields not part of a status stay 0 / ""."""

    status: str
    attempt: int = 0
    fence: int = 0
    lease_until_ms: int = 0
    server_now_ms: int = 0
    detail: str = ""


@dataclass(frozen=True)
class ClaimRequest:
    """One claim to make: which job state, which slot, as whom."""

    state_key: str
    slot_ms: int
    owner: str
    lease_ms: int
    max_attempts: int
    overlap: str
    holder: str

    def args(self) -> tuple[list[str], list[Any]]:
        return [self.state_key], [
            self.slot_ms,
            self.owner,
            self.lease_ms,
            self.max_attempts,
            self.overlap,
            self.holder,
        ]


def decode_claim(reply: Any) -> ClaimReply:
    """Turn the script's array reply into a :class:`ClaimReply`."""
    status = text(reply[0])
    rest = [int(x) if isinstance(x, int) else text(x) for x in reply[1:]]
    if status == WON:
        return ClaimReply(
            status, attempt=int(rest[0]), fence=int(rest[1]), lease_until_ms=int(rest[2])
        )
    if status == TAKEN:
        return ClaimReply(
            status, lease_until_ms=int(rest[0]), attempt=int(rest[1]), server_now_ms=int(rest[2])
        )
    if status == BUSY:
        return ClaimReply(status, lease_until_ms=int(rest[0]), server_now_ms=int(rest[1]))
    if status == EXHAUSTED:
        return ClaimReply(status, attempt=int(rest[0]))
    if status in (DONE, STALE, CORRUPT):
        return ClaimReply(status, detail=str(rest[0]) if rest else "")
    return ClaimReply(status)


def claim(client: Any, request: ClaimRequest) -> ClaimReply:
    """Claim one slot: one round trip."""
    keys, args = request.args()
    return decode_claim(CLAIM(client, keys, args))


def claim_many(client: Any, requests: Sequence[ClaimRequest]) -> list[ClaimReply]:
    """Claim many slots in one pipelined round trip (for many jobs due together)."""
    pipe = client.pipeline(transaction=False)
    for request in requests:
        keys, args = request.args()
        CLAIM.queue(pipe, keys, args)
    return [decode_claim(r) for r in execute_pipeline(client, pipe, [CLAIM])]


def renew(client: Any, state_key: str, slot_ms: int, owner: str, lease_ms: int) -> Optional[int]:
    """Extend a running slot's lease; the new deadline (server ms), or None when lost."""
    reply = RENEW(client, [state_key], [slot_ms, owner, lease_ms])
    return int(reply[1]) if text(reply[0]) == "ok" else None


def finish(client: Any, state_key: str, slot_ms: int, owner: str, outcome: str) -> bool:
    """Record a run's end ("done", "failed" or "handover"); False when no longer ours."""
    reply = FINISH(client, [state_key], [slot_ms, owner, outcome])
    return text(reply[0]) == "ok"
