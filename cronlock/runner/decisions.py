"""What the scheduler does with each claim reply: a pure function from reply to decision.

| reply                    | decision                                                      |
|--------------------------|---------------------------------------------------------------|
| ``won``                  | start the run (a worker thread, or inline under run_pending)  |
| ``won``, too few replicas| give the slot back at once (``wait_replicas``)                |
| ``busy``, claimed early  | ask again at the slot's boundary                              |
| ``taken``                | re-check when the holder's lease would lapse                  |
| ``done``/``stale``       | nothing (another replica ran it)                              |
| ``busy``/``paused``      | nothing (counted; ``busy`` logged)                            |
| ``exhausted``            | nothing (the slot is marked failed; on_error "abandoned")     |
| ``gone`` (a re-check)    | nothing: the store forgot the slot (empty restart); logged    |
| ``corrupt``              | report a `CorruptStateError`                                  |
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from cronlock.stores.types import ClaimReply, ClaimStatus, Replication

# Re-check a slot someone else runs this long after its lease deadline.
WATCH_MARGIN_MS = 50


class Action(Enum):
    """What to do with one claimed slot."""

    START = "start"
    GIVE_BACK = "give back"
    ASK_AT_BOUNDARY = "ask at boundary"
    RECHECK = "recheck"
    NOTHING = "nothing"


@dataclass(frozen=True)
class Decision:
    """One reply's consequence: the action, what observers hear, the counters to add,
    and for ``RECHECK`` how long to wait."""

    action: Action
    status: ClaimStatus  # what observers hear
    counters: tuple[str, ...] = ()
    recheck_in_ms: int = 0


_QUIET = {
    ClaimStatus.DONE: ("claims_lost",),
    ClaimStatus.STALE: ("claims_lost",),
    ClaimStatus.BUSY: ("claims_skipped",),
    ClaimStatus.PAUSED: ("claims_paused",),
    ClaimStatus.EXHAUSTED: ("slots_failed",),
    ClaimStatus.CORRUPT: (),
    ClaimStatus.GONE: ("slots_forgotten",),
}


def decide(reply: ClaimReply, *, early: bool, replication: Optional[Replication]) -> Decision:
    """The decision for ``reply`` to a claim (``early``: sent before the slot's boundary)."""
    status = reply.status
    if status == ClaimStatus.WON:
        if replication is not None and reply.replicas < replication.replicas:
            return Decision(Action.GIVE_BACK, ClaimStatus.UNREPLICATED, ("claims_unreplicated",))
        counters = ("claims_won", "takeovers") if reply.attempt > 1 else ("claims_won",)
        return Decision(Action.START, status, counters)
    if status == ClaimStatus.BUSY and early:
        # Claimed early: the previous run may still end before the boundary. Ask again
        # then, so the answer is the one a claim at the boundary gets.
        return Decision(Action.ASK_AT_BOUNDARY, status)
    if status == ClaimStatus.TAKEN:
        # Look again when the holder's lease would lapse: one round trip per lease period.
        wait_ms = max(0, reply.lease_until_ms - reply.server_now_ms) + WATCH_MARGIN_MS
        return Decision(Action.RECHECK, status, ("claims_lost",), wait_ms)
    return Decision(Action.NOTHING, status, _QUIET.get(status, ()))
