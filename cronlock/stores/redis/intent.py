"""What operators decided, kept so that runners can put it back after Redis forgot it.

An empty restart (no persistence), a failover to a replica that had not received the
writes, or an eviction loses every key. Pause flags, pause-all and dynamic schedules are
operators' decisions, not run state: losing them silently un-pauses jobs and deletes
schedules. So:

* every pause, resume, pause-all and resume-all also updates the set ``P:paused`` and
  bumps ``P:ops:version`` (`paused_changes`), and each runner re-reads the decisions
  (`operational_state`) when that version or the schedules' version changes;
* each sync writes ``P:epoch`` when absent and reads it back (`SYNC_EPOCH`): a runner
  that finds a token other than the one it knew knows the state was lost;
* the first such runner (``SET P:restored:EPOCH NX``) writes back what it knew, only what
  is missing (`restore`), and records a ``restored`` history entry for each item.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any, Optional

from cronlock._keys import (
    epoch_key,
    events_channel,
    history_key,
    job_key,
    operations_version_key,
    pause_all_key,
    paused_key,
    restored_key,
    schedules_key,
    schedules_version_key,
)
from cronlock._scripts import text
from cronlock.outcomes import HistoryEvent
from cronlock.stores.types import OperationalState, Retention

__all__ = ["operational_state", "paused_changes", "queue_epoch", "restore"]

#: How long the claim "this runner restores epoch E" is kept.
RESTORE_CLAIM_S = 86_400


def queue_epoch(pipe: Any, prefix: str) -> None:
    """Queue on a sync's pipeline: write an epoch token if there is none, read it, and
    read the operations' version (three replies: the SET's, the token, the version)."""
    key = epoch_key(prefix)
    pipe.set(key, secrets.token_hex(8), nx=True)
    pipe.get(key)
    pipe.get(operations_version_key(prefix))


def paused_changes(
    pipe: Any, prefix: str, *, paused: Sequence[str], resumed: Sequence[str]
) -> None:
    """Queue the bookkeeping of a pause or resume on an operator's pipeline."""
    if paused:
        pipe.sadd(paused_key(prefix), *paused)
    if resumed:
        pipe.srem(paused_key(prefix), *resumed)
    pipe.incr(operations_version_key(prefix))


def operational_state(client: Any, prefix: str) -> OperationalState:
    """The paused job keys, pause-all and the dynamic schedules, in one round trip."""
    pipe = client.pipeline(transaction=False)
    pipe.smembers(paused_key(prefix))
    pipe.exists(pause_all_key(prefix))
    pipe.hgetall(schedules_key(prefix))
    paused, pause_all, schedules = pipe.execute()
    return OperationalState(
        paused=frozenset(text(k) for k in paused),
        pause_all=bool(pause_all),
        schedules={text(k): text(v) for k, v in schedules.items()},
    )


def restore(
    client: Any,
    prefix: str,
    epoch: str,
    state: OperationalState,
    *,
    holder: str,
    retention: Retention,
) -> Optional[list[str]]:
    """Write back what ``state`` holds and the store lacks, once per epoch (see the
    module docstring); None when another runner claimed this epoch's restore."""
    claim = restored_key(prefix, epoch)
    if not client.set(claim, holder, nx=True, ex=RESTORE_CLAIM_S):
        owner = client.get(claim)
        if owner is None or text(owner) != holder:  # ours: an earlier attempt failed midway
            return None
    paused = sorted(state.paused)
    schedules = sorted(state.schedules.items())
    pipe = client.pipeline(transaction=False)
    for key in paused:
        pipe.hsetnx(job_key(prefix, key), "paused", "1")
    for schedule_id, spec in schedules:
        pipe.hsetnx(schedules_key(prefix), schedule_id, spec)
    if state.pause_all:
        pipe.set(pause_all_key(prefix), "1", nx=True)
    replies = pipe.execute()
    done: list[tuple[str, str]] = []  # (job key, what)
    done += [(key, "paused") for key, put in zip(paused, replies) if put]
    done += [(sid, "schedule") for (sid, _), put in zip(schedules, replies[len(paused) :]) if put]
    pipe = client.pipeline(transaction=False)
    if paused:
        pipe.sadd(paused_key(prefix), *paused)
    pipe.incr(operations_version_key(prefix))
    pipe.incr(schedules_version_key(prefix))
    if retention.max_entries:
        for key, what in done:
            pipe.xadd(
                history_key(prefix, key),
                {"event": str(HistoryEvent.RESTORED), "reason": what, "holder": holder},
                maxlen=retention.max_entries,
                approximate=False,
            )
    if any(what == "schedule" for _, what in done):
        pipe.publish(events_channel(prefix), json.dumps({"type": "schedules"}))
    pipe.execute()
    restored = [f"{what}:{key}" for key, what in done]
    if state.pause_all and replies[-1]:
        restored.append("pause-all")
    return restored
