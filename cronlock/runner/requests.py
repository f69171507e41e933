"""What a heap entry's claim asks the store, and which claims are read first.

The one place that turns an `Entry` into a `SlotClaim`. A claim of a job that another
replica lately claimed first is read first (`Store.read_claims`): in a fleet, a loser's
tick then costs the store one round trip of reads, whatever the number of its due jobs,
and only the claims the reads leave open are sent, within the runner's capacity. A
replica left alone sends its claims straight away (one round trip each batch).
"""

from __future__ import annotations

import logging
import random
from typing import Optional

from cronlock.job import Job
from cronlock.outcomes import ClaimStatus
from cronlock.runner.slots import Entry, rechecks_first
from cronlock.stores.base import Store
from cronlock.stores.types import ClaimReply, Retention, SlotClaim

logger = logging.getLogger("cronlock")

# Replies that say another replica claimed the slot (or a newer one) first.
LOST = frozenset({ClaimStatus.TAKEN, ClaimStatus.DONE, ClaimStatus.STALE})
# For this long (slot time) after a claim of a job was lost here, its claims read first.
PROBE_FOR_MS = 5 * 60 * 1000
# Reads go in round trips of this many (a claim batch's size).
READ_BATCH = 500


def slot_claim(entry: Entry, holder: str, retention: Retention) -> SlotClaim:
    """The claim of ``entry``'s slot, as ``holder``, keeping ``retention`` of history."""
    job = entry.job
    options = job.options
    return SlotClaim(
        job.key,
        entry.slot_ms,
        entry.owner,
        options.ttl_ms,
        options.max_attempts,
        options.overlap,
        holder,
        retention,
        recheck=entry.kind == "watch",
        wake=rechecks_first(entry),
    )


def note_reply(job: Job, slot_ms: int, status: ClaimStatus) -> None:
    """Remember, for the job's next claims, that its claim of ``slot_ms`` was lost."""
    if status in LOST:
        job.lost_slot_ms = slot_ms


def read_first(
    store: Store, entries: list[Entry], holder: str, retention: Retention
) -> tuple[list[Entry], list[tuple[Entry, ClaimReply]]]:
    """(the entries still to claim; those the store's reads answered).

    Only entries of jobs lost within ``PROBE_FOR_MS`` are read. After a read, the entries
    left of each slot start at a random one of them (`spread`). When the read fails the
    claims go out as they would have, in order: their own errors are then reported.
    """
    probed = [e for e in entries if lately_lost(e)]
    if not probed:
        return entries, []
    replies: list[Optional[ClaimReply]] = []
    try:
        for start in range(0, len(probed), READ_BATCH):
            chunk = probed[start : start + READ_BATCH]
            replies += store.read_claims([slot_claim(e, holder, retention) for e in chunk])
    except store.errors as exc:
        logger.debug("cronlock: reading %d claims first failed: %r", len(probed), exc)
        return entries, []
    answered = [(e, r) for e, r in zip(probed, replies) if r is not None]
    done = {id(e) for e, _ in answered}
    return spread([e for e in entries if id(e) not in done]), answered


def spread(entries: list[Entry]) -> list[Entry]:
    """``entries`` with each run of one slot's entries started at a random one of them
    (in order from there, round); the slots keep their order.

    Replicas that read the same free slots at once then claim different ones first,
    instead of all racing for the first few their capacity allows, while a claim that
    waited longer (an older slot) still goes first.
    """
    out: list[Entry] = []
    start = 0
    while start < len(entries):
        end = start
        while end < len(entries) and entries[end].slot_ms == entries[start].slot_ms:
            end += 1
        turn = random.randrange(start, end)
        out += entries[turn:end] + entries[start:turn]
        start = end
    return out


def lately_lost(entry: Entry) -> bool:
    """Whether another replica claimed one of ``entry``'s job's slots first lately."""
    lost = entry.job.lost_slot_ms
    return lost is not None and entry.slot_ms - lost <= PROBE_FOR_MS
