"""Typed calls of the job scripts: claim, renew, finish, trigger (one round trip each).

See ``cronlock/scripts/job_*.lua`` for each script's exact contract. Run history is
written by the same scripts (no extra round trip) when a `HistoryOptions` with
a stream key is passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional, cast

from redis.cluster import RedisCluster
from redis.exceptions import RedisError

from cronlock._scripts import Script, execute_pipeline, text
from cronlock.outcomes import ClaimStatus, RunKind, TriggerStatus

CLAIM = Script("job_claim")
RENEW = Script("job_renew")
FINISH = Script("job_finish")
TRIGGER = Script("job_trigger")

# The claim script's reply words (cronlock.outcomes has one Enum per set of words).
WON = ClaimStatus.WON
TAKEN = ClaimStatus.TAKEN
DONE = ClaimStatus.DONE
STALE = ClaimStatus.STALE
BUSY = ClaimStatus.BUSY
EXHAUSTED = ClaimStatus.EXHAUSTED
PAUSED = ClaimStatus.PAUSED
CORRUPT = ClaimStatus.CORRUPT


@dataclass(frozen=True)
class ClaimReply:
    """What the claim script answered; fields not part of a status stay 0 / ""."""

    status: ClaimStatus
    attempt: int = 0
    fence: int = 0
    lease_until_ms: int = 0
    server_now_ms: int = 0
    detail: str = ""
    replicas: int = -1  # replicas that acknowledged the claim (WAIT); -1: not asked


@dataclass(frozen=True)
class Replication:
    """Claims wait (``WAIT``, in the same pipeline) for this many replicas, up to a timeout."""

    replicas: int
    timeout_ms: int


@dataclass(frozen=True)
class HistoryOptions:
    """Where and how much run history the scripts write.

    ``stream`` empty or ``max_entries`` 0 writes none; ``max_age_ms`` 0 has no age limit.
    """

    stream: str = ""
    max_entries: int = 0
    max_age_ms: int = 0

    @property
    def enabled(self) -> bool:
        return bool(self.stream) and self.max_entries > 0


NO_HISTORY = HistoryOptions()


@dataclass(frozen=True)
class FinishInfo:
    """What the history entry of a finished run says besides its outcome."""

    attempt: int = 0
    fence: int = 0
    holder: str = ""
    duration_ms: int = 0
    error_type: str = ""
    traceback: str = ""
    kind: str = RunKind.SCHEDULED


@dataclass(frozen=True)
class TriggerReply:
    """What the trigger script answered: ``none``, ``won``, ``paused``, ``busy``, ``corrupt``."""

    status: TriggerStatus
    slot_ms: int = 0
    fence: int = 0
    lease_until_ms: int = 0
    trigger_id: str = ""


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
    history: HistoryOptions = NO_HISTORY

    def args(self) -> tuple[list[str], list[Any]]:
        args: list[Any] = [
            self.slot_ms,
            self.owner,
            self.lease_ms,
            self.max_attempts,
            self.overlap,
            self.holder,
        ]
        if not self.history.enabled:
            return [self.state_key], args
        h = self.history
        return [self.state_key, h.stream], [*args, h.max_entries, h.max_age_ms]


def decode_claim(reply: Any) -> ClaimReply:
    """Turn the script's array reply into a `ClaimReply`."""
    status = ClaimStatus(text(reply[0]))
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


def claim(
    client: Any, request: ClaimRequest, replication: Optional[Replication] = None
) -> ClaimReply:
    """Claim one slot: one round trip (with ``replication``, the claim and a ``WAIT``)."""
    if replication is None:
        keys, args = request.args()
        return decode_claim(CLAIM(client, keys, args))
    reply = _pipelined(client, [request], replication)[0]
    if isinstance(reply, Exception):
        raise reply
    return cast(ClaimReply, reply)


def claim_many(
    client: Any, requests: Sequence[ClaimRequest], replication: Optional[Replication] = None
) -> list[Any]:
    """Claim many slots in one pipelined round trip (for many jobs due together).

    Each element is a `ClaimReply`, or the exception that one claim raised (the
    others still count). redis-py refuses EVALSHA in ``RedisCluster`` pipelines, so on a
    cluster the claims are sent one after another (one round trip each).

    With ``replication``, a ``WAIT`` ends the pipeline: it runs on the connection that
    sent the claims, so its count (in each reply's ``replicas``) is of replicas that
    have every one of them. A ``WAIT`` that failed counts as no replica.
    """
    if isinstance(client, RedisCluster):
        replies: list[Any] = []
        for request in requests:
            try:
                replies.append(claim(client, request))
            except RedisError as exc:
                replies.append(exc)
        return replies
    return _pipelined(client, requests, replication)


def _pipelined(
    client: Any, requests: Sequence[ClaimRequest], replication: Optional[Replication]
) -> list[Any]:
    """The claims (and the WAIT) in one pipeline on one connection; see `claim_many`."""
    pipe = client.pipeline(transaction=False)
    for request in requests:
        keys, args = request.args()
        CLAIM.queue(pipe, keys, args)
    if replication is not None:
        pipe.execute_command("WAIT", replication.replicas, replication.timeout_ms)
    results = execute_pipeline(client, pipe, [CLAIM], repeat_last=replication is not None)
    if replication is None:
        return [r if isinstance(r, Exception) else decode_claim(r) for r in results]
    acked = results.pop()
    replicas = acked if isinstance(acked, int) else 0
    return [
        r if isinstance(r, Exception) else replace(decode_claim(r), replicas=replicas)
        for r in results
    ]


def renew(client: Any, state_key: str, slot_ms: int, owner: str, lease_ms: int) -> Optional[int]:
    """Extend a running slot's lease; the new deadline (server ms), or None when lost."""
    reply = RENEW(client, [state_key], [slot_ms, owner, lease_ms])
    return int(reply[1]) if text(reply[0]) == "ok" else None


def finish(
    client: Any,
    state_key: str,
    slot_ms: int,
    owner: str,
    outcome: str,
    *,
    history: HistoryOptions = NO_HISTORY,
    info: Optional[FinishInfo] = None,
) -> bool:
    """Record a run's end ("done", "failed" or "handover"); False when no longer ours."""
    if not history.enabled:
        reply = FINISH(client, [state_key], [slot_ms, owner, outcome])
        return text(reply[0]) == "ok"
    i = info or FinishInfo()
    reply = FINISH(
        client,
        [state_key, history.stream],
        [
            slot_ms,
            owner,
            outcome,
            history.max_entries,
            history.max_age_ms,
            i.attempt,
            i.fence,
            i.holder,
            i.duration_ms,
            i.error_type,
            i.traceback,
            i.kind,
        ],
    )
    return text(reply[0]) == "ok"


def trigger(
    client: Any,
    state_key: str,
    trigger_key: str,
    *,
    owner: str,
    lease_ms: int,
    overlap: str,
    holder: str,
    history: HistoryOptions = NO_HISTORY,
) -> TriggerReply:
    """Pop one pending manual-run request of a job and start it if allowed: one round trip.

    ``history.stream`` names the job's history stream even when history is off (the
    script always lists it as a key, so Redis Cluster routes the call by its hash tag).
    """
    reply = TRIGGER(
        client,
        [state_key, trigger_key, history.stream or state_key],
        [
            owner,
            lease_ms,
            overlap,
            holder,
            history.max_entries if history.stream else 0,
            history.max_age_ms,
        ],
    )
    status = TriggerStatus(text(reply[0]))
    if status == TriggerStatus.WON:
        return TriggerReply(
            status,
            slot_ms=int(reply[1]),
            fence=int(reply[2]),
            lease_until_ms=int(reply[3]),
            trigger_id=text(reply[4]),
        )
    if status in (TriggerStatus.PAUSED, TriggerStatus.BUSY):
        return TriggerReply(status, trigger_id=text(reply[1]))
    if status == TriggerStatus.CORRUPT:
        return TriggerReply(status, trigger_id=text(reply[1]))
    return TriggerReply(status)
