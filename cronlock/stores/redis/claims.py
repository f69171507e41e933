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

from cronlock._batch import run_many
from cronlock._scripts import Script, text
from cronlock.stores.types import (
    ClaimReply,
    ClaimStatus,
    FinishInfo,
    Replication,
    TriggerReply,
    TriggerStatus,
)

CLAIM = Script("job_claim")
RENEW = Script("job_renew")
FINISH = Script("job_finish")
TRIGGER = Script("job_trigger")

WON = ClaimStatus.WON
TAKEN = ClaimStatus.TAKEN
DONE = ClaimStatus.DONE
STALE = ClaimStatus.STALE
BUSY = ClaimStatus.BUSY
EXHAUSTED = ClaimStatus.EXHAUSTED
PAUSED = ClaimStatus.PAUSED
CORRUPT = ClaimStatus.CORRUPT


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
            status,
            attempt=int(rest[0]),
            fence=int(rest[1]),
            lease_until_ms=int(rest[2]),
            ended=_pairs(rest[3:]),
        )
    if status == TAKEN:
        return ClaimReply(
            status, lease_until_ms=int(rest[0]), attempt=int(rest[1]), server_now_ms=int(rest[2])
        )
    if status == BUSY:
        return ClaimReply(
            status,
            lease_until_ms=int(rest[0]),
            server_now_ms=int(rest[1]),
            ended=_pairs(rest[2:]),
        )
    if status == EXHAUSTED:
        return ClaimReply(status, attempt=int(rest[0]))
    if status in (DONE, STALE, CORRUPT):
        return ClaimReply(status, detail=str(rest[0]) if rest else "")
    return ClaimReply(status)


def _pairs(values: Sequence[Any]) -> tuple[tuple[int, int], ...]:
    """``[slot, attempt, slot, attempt, ...]`` as pairs (the runs a claim recorded as ended)."""
    return tuple((int(values[i]), int(values[i + 1])) for i in range(0, len(values) - 1, 2))


Call = tuple[list[str], list[Any]]  # a claim's KEYS and ARGV


def claim(
    client: Any, request: ClaimRequest, replication: Optional[Replication] = None
) -> ClaimReply:
    """Claim one slot: one round trip (with ``replication``, the claim and a ``WAIT``)."""
    return claim_call(client, request.args(), replication)


def claim_many(
    client: Any, requests: Sequence[ClaimRequest], replication: Optional[Replication] = None
) -> list[Any]:
    """Claim many slots in one pipelined round trip; see `claim_calls`."""
    return claim_calls(client, [request.args() for request in requests], replication)


def claim_call(client: Any, call: Call, replication: Optional[Replication] = None) -> ClaimReply:
    """One claim given as its KEYS and ARGV: one round trip (with a ``WAIT``: one pipeline)."""
    if replication is None:
        keys, args = call
        return decode_claim(CLAIM(client, keys, args))
    reply = claim_calls(client, [call], replication)[0]
    if isinstance(reply, Exception):
        raise reply
    return cast(ClaimReply, reply)


def claim_calls(
    client: Any, calls: Sequence[Call], replication: Optional[Replication] = None
) -> list[Any]:
    """Claim many slots in one pipelined round trip (for many jobs due together).

    Each element is a `ClaimReply`, or the exception that one claim raised (the
    others still count). On a cluster the claims go one write per node, the nodes in
    parallel (`cronlock._nodes`); a claim redirected there is sent again alone.

    With ``replication``, a ``WAIT`` ends the pipeline: it runs on the connection that
    sent the claims, so its count (in each reply's ``replicas``) is of replicas that
    have every one of them. A ``WAIT`` that failed counts as no replica.
    """
    wait = None if replication is None else (replication.replicas, replication.timeout_ms)
    if isinstance(client, RedisCluster):
        wait = None  # refused by check_replication; a claim batch is per node there
    results = run_many(client, CLAIM, calls, wait)
    if wait is None:
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


def finish(client: Any, *args: Any, **kwargs: Any) -> bool:
    """Record a run's end, given `finish_call`'s arguments; False when no longer ours."""
    return finish_once(client, finish_call(*args, **kwargs))


def finish_once(client: Any, call: Call) -> bool:
    """One finish given as its KEYS and ARGV: one ``EVALSHA``; False when not ours."""
    keys, args = call
    return text(FINISH(client, keys, args)[0]) == "ok"


def finish_waited(client: Any, call: Call, replication: Replication) -> tuple[bool, int]:
    """The finish and a ``WAIT`` in one pipeline on one connection (one round trip):
    (whether it was ours, how many replicas have it). A ``WAIT`` that failed counts 0.

    After NOSCRIPT the finish is re-sent and the ``WAIT`` after it, so the count covers it.
    """
    reply, acked = run_many(client, FINISH, [call], (replication.replicas, replication.timeout_ms))
    if isinstance(reply, Exception):
        raise reply
    return text(reply[0]) == "ok", acked if isinstance(acked, int) else 0


def finish_many(client: Any, calls: Sequence[Call]) -> list[Any]:
    """Many finishes in one round trip (one per node on a cluster): each whether it was
    ours, or the exception in its place."""
    return [
        reply if isinstance(reply, Exception) else text(reply[0]) == "ok"
        for reply in run_many(client, FINISH, calls)
    ]


def finish_call(
    state_key: str,
    slot_ms: int,
    owner: str,
    outcome: str,
    *,
    history: HistoryOptions = NO_HISTORY,
    info: Optional[FinishInfo] = None,
    wake: Optional[tuple[str, str]] = None,
) -> Call:
    """The finish script's KEYS and ARGV: a run's end ("done", "failed" or "handover").

    ``wake``: the events channel and the message the script publishes when a replica
    told ``taken`` asked to hear of this finish.
    """
    if not history.enabled and wake is None:
        return [state_key], [slot_ms, owner, outcome]
    i = info or FinishInfo()
    return (
        [state_key, history.stream] if history.enabled else [state_key],
        [
            slot_ms,
            owner,
            outcome,
            history.max_entries if history.enabled else 0,
            history.max_age_ms,
            i.attempt,
            i.fence,
            i.holder,
            i.duration_ms,
            i.error_type,
            i.traceback,
            i.kind,
            *(wake or ()),
        ],
    )


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
    if status in (TriggerStatus.PAUSED, TriggerStatus.BUSY, TriggerStatus.EXPIRED):
        return TriggerReply(status, trigger_id=text(reply[1]))
    if status == TriggerStatus.CORRUPT:
        return TriggerReply(status, trigger_id=text(reply[1]))
    return TriggerReply(status)
