"""The runner's heap of next slots, and the backlog of claims waiting for a free worker.

Pure bookkeeping on the injected clock's milliseconds (which slot is due: rule 1 of
[`cronlock.clock`][cronlock.clock]): no store, no threads. The scheduler holds its lock
around every call.

After each slot the job's next slot is pushed, so the heap holds one entry per job (plus
re-checks of slots that run elsewhere).

A re-check is dropped, without a claim, once the slot is known to be *settled*: this
runner's claim of a newer slot of the job was recorded (the store keeps only the latest
slot, so the re-check could only answer ``stale``), or the store announced the slot's
finish. The re-check stays queued until then: it is how a crashed owner's slot is taken
over.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import secrets
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from cronlock._stats import StatsCounter
from cronlock.job import Job

logger = logging.getLogger("cronlock")

# A slot popped this late (beyond catch-up and jitter) still counts as on time.
SCHEDULING_SLACK_MS = 1000
# Without jitter, each replica claims a job's slot up to this much before its boundary, at
# a random point: whichever replica's claim arrives first wins, so with clocks that agree
# within this window the winners spread over the replicas instead of the earliest clock
# winning every slot. The handler still starts at the boundary (a won run waits for it),
# so the start delay does not move. The replica that won the job's previous slot waits
# for the end of the window: the others get their turn even when its clock runs a few
# ms early, and alone it still claims before the boundary.
CLAIM_SPREAD_MS = 20


@dataclass(order=True)
class Entry:
    """A heap entry: claim ``slot_ms`` of ``job`` at ``due_ms`` (runner clock)."""

    due_ms: int
    seq: int
    job: Job = field(compare=False)
    generation: int = field(compare=False)
    slot_ms: int = field(compare=False)
    kind: str = field(compare=False)  # "slot" (new), "watch" (re-check a running one), "claim"
    owner: str = field(compare=False, default_factory=lambda: secrets.token_hex(8))
    start_ms: int = field(compare=False, default=0)  # the handler starts no earlier
    early: bool = field(compare=False, default=False)  # claimed before ``start_ms``
    yielded: bool = field(compare=False, default=False)  # let others claim first (won last)


@dataclass
class Budget:
    """Worker time (ms) each idle worker may take on beyond its own claim in one batch.

    A claim costs its job's last run here (``Job.busy_ms``). A job that never ran here
    costs ``unknown_ms``, the longest of this runner's latest runs (`RunTimes`), so a
    burst of new short jobs goes out in a few batches; before any run ended here it
    ends the extension: its run could keep a worker for any time. Busy workers add
    nothing: their runs may last any time too.
    """

    ms_per_worker: float
    unknown_ms: Optional[float] = None

    def fits(self, entries: list[Entry], idle: int) -> int:
        """How many of ``entries``, in order, ``idle`` workers take on within the budget."""
        left = self.ms_per_worker * idle
        for n, entry in enumerate(entries):
            cost = entry.job.busy_ms
            if cost is None:
                cost = self.unknown_ms
            if cost is None:
                return n
            left -= max(cost, MIN_RUN_MS)
            if left < 0:
                return n
        return len(entries)


# A run is never expected to take less than this (a budget stays finite).
MIN_RUN_MS = 0.1


class RunTimes:
    """A worker's time (ms) on each of this runner's latest runs, whatever the job."""

    def __init__(self, keep: int = 32) -> None:
        self._latest: deque[float] = deque(maxlen=keep)

    def add(self, ms: float) -> None:
        self._latest.append(ms)

    def longest(self) -> Optional[float]:
        return max(self._latest, default=None)


def due_slot(job: Job, slot_ms: int, now_ms: int) -> Optional[int]:
    """The slot to claim for an entry popped at ``now_ms``; None if missed for good.

    A late wake-up (process paused, host suspended) may have passed several slots:
    the latest one within catch-up runs once, older ones are coalesced into it.
    """
    options = job.options
    latest = job.schedule.latest_at_or_before(now_ms)
    if latest is not None and latest > slot_ms:
        slot_ms = latest
    # Being woken a little after the boundary (jitter, a busy machine) is not missing it.
    allowed = options.catch_up_ms + options.jitter_ms + SCHEDULING_SLACK_MS
    return slot_ms if now_ms - slot_ms <= allowed else None


def rechecks_first(entry: Entry) -> bool:
    """Whether a ``taken`` reply's re-check (at the lease's end) would come before the
    job's next slot, which would otherwise settle it: then the claim asks the holder's
    finish to announce itself (``SlotClaim.wake``)."""
    job = entry.job
    following = job.schedule.next_after(entry.slot_ms)
    return following is None or following - entry.slot_ms > job.options.ttl_ms


class SlotQueue:
    """Next slots by due time, and claims that wait for a worker (see the module docstring)."""

    def __init__(self, stats: StatsCounter, max_workers: int) -> None:
        self.stats = stats
        self.max_workers = max_workers
        self.heap: list[Entry] = []
        self.backlog: deque[Entry] = deque()  # due claims waiting for a free worker
        self.seeded = False
        self._seq = itertools.count()
        self._spread_seed = random.getrandbits(64)
        # job key -> the latest slot known settled: re-checks up to it are pointless
        self.settled: dict[str, int] = {}

    def clear(self) -> None:
        self.heap.clear()
        self.backlog.clear()
        self.settled.clear()
        self.seeded = False

    def settle(self, key: str, slot_ms: int) -> None:
        """Slots of ``key`` up to ``slot_ms`` need no re-check (see the module docstring)."""
        if slot_ms > self.settled.get(key, -1):
            self.settled[key] = slot_ms

    def seed_all(self, jobs: Iterable[Job], now_ms: int) -> None:
        """Queue the first slot of every enabled job."""
        self.heap.clear()
        for job in jobs:
            if job.enabled:
                self.seed(job, now_ms)
        self.seeded = True

    def seed(self, job: Job, now_ms: int) -> None:
        """Queue the first slot: the latest one within catch-up, else the next one."""
        latest = job.schedule.latest_at_or_before(now_ms)
        if latest is not None and now_ms - latest <= job.options.catch_up_ms:
            self.push_slot(job, latest)
        else:
            self.push_slot(job, job.schedule.next_after(now_ms))

    def push_slot(self, job: Job, slot_ms: Optional[int]) -> None:
        job.next_slot_ms = slot_ms
        if slot_ms is None:
            return
        jitter_ms = job.options.jitter_ms
        # A jitter delays the claim (and so the start); without one, the claim goes out at
        # a random point of the spread window before the boundary (see CLAIM_SPREAD_MS).
        offset = random.randint(0, jitter_ms) if jitter_ms else -self.spread_offset(slot_ms)
        heapq.heappush(
            self.heap,
            Entry(slot_ms + offset, next(self._seq), job, job.generation, slot_ms, "slot"),
        )

    def spread_offset(self, slot_ms: int) -> int:
        """How early (ms) this runner claims slots at ``slot_ms``: random per runner and
        slot, the same for all its jobs due then, so they still go out in one batch and in
        the order they were registered."""
        return hash((self._spread_seed, slot_ms)) % (CLAIM_SPREAD_MS + 1)

    def push(self, entry: Entry, due_ms: int) -> None:
        """Queue ``entry`` (a claim to retry or a slot to re-check) again at ``due_ms``."""
        entry.due_ms = due_ms
        entry.seq = next(self._seq)
        heapq.heappush(self.heap, entry)

    def push_watch(self, job: Job, slot_ms: int, due_ms: int) -> None:
        """Re-check ``slot_ms`` of ``job`` at ``due_ms`` (another replica handed it over)."""
        heapq.heappush(
            self.heap, Entry(due_ms, next(self._seq), job, job.generation, slot_ms, "watch")
        )

    def next_due(self) -> Optional[int]:
        return self.heap[0].due_ms if self.heap else None

    def pop_due(self, now_ms: int, *, early: bool = True) -> list[Entry]:
        """The entries due by ``now_ms``; with ``early`` False, not the slots whose boundary
        is still ahead (claimed within the spread window), which stay queued."""
        batch, ahead = [], []
        while self.heap and self.heap[0].due_ms <= now_ms:
            entry = heapq.heappop(self.heap)
            if not early and entry.kind == "slot" and entry.slot_ms > now_ms:
                ahead.append(entry)
            else:
                batch.append(entry)
        for entry in ahead:
            heapq.heappush(self.heap, entry)
        return batch

    def to_claim(self, batch: list[Entry], now_ms: int) -> list[Entry]:
        """The entries of ``batch`` to claim now; pushes each job's next slot.

        Entries of stopped jobs (older generations) are dropped, and slots missed beyond
        catch-up are counted and logged.
        """
        claims: list[Entry] = []
        for entry in batch:
            job = entry.job
            if entry.generation != job.generation or not job.enabled:
                continue
            if entry.kind == "watch" and self.settled.get(job.key, -1) >= entry.slot_ms:
                self.stats.add("rechecks_skipped")
                continue
            if entry.kind == "watch":  # handed over before its boundary: its run waits
                entry.start_ms = entry.slot_ms
                entry.early = entry.slot_ms > now_ms
            if entry.kind == "slot" and self._yields(entry, now_ms):
                continue
            if entry.kind == "slot":
                slot = due_slot(job, entry.slot_ms, now_ms)
                self.push_slot(job, job.schedule.next_after(max(entry.slot_ms, slot or now_ms)))
                if slot is None:
                    self.stats.add("slots_missed")
                    logger.info(
                        "cronlock: job %r missed its slot(s) before %s (beyond catch-up)",
                        job.key,
                        datetime.fromtimestamp(now_ms / 1000, timezone.utc).isoformat(),
                    )
                    continue
                entry.start_ms = max(entry.due_ms, slot)
                entry.early = entry.start_ms > now_ms
                entry.slot_ms = slot
                entry.kind = "claim"
            claims.append(entry)
        return claims

    def _yields(self, entry: Entry, now_ms: int) -> bool:
        """Queue a slot again at the end of the spread window when this runner won the
        job's previous slot (see ``CLAIM_SPREAD_MS``); True if it was queued again."""
        if not entry.job.won_last or entry.yielded or entry.due_ms >= entry.slot_ms:
            return False  # not the winner, already yielded, or a jitter (no window)
        if entry.slot_ms <= now_ms:
            return False  # late already: claim now
        entry.yielded = True
        self.push(entry, entry.slot_ms)
        return True

    def within_capacity(
        self, claims: list[Entry], running: int, budget: Optional[Budget] = None
    ) -> list[Entry]:
        """The claims to send now: as many as this runner can start at once or soon.

        A replica that won more slots than it has workers would start the rest late
        (and their next slots would find them busy) while other replicas' workers sat
        idle. So the claims sent are one per idle worker, plus, with ``budget``, those
        its idle workers are expected to start within the budget's horizon (jobs whose
        last runs were short). The others wait in the backlog, in order, for a worker of
        this runner to be free; meanwhile a replica with idle workers claims them.
        """
        idle = max(self.max_workers - running, 0)
        count = idle + (budget.fits(claims[idle:], idle) if budget is not None else 0)
        if len(claims) <= count:
            return claims
        send, wait = claims[:count], claims[count:]
        for entry in wait:
            entry.early = False  # claimed after its boundary now
        self.backlog.extend(wait)
        logger.debug("cronlock: %d claim(s) wait for a free worker", len(wait))
        return send

    def take_backlog(self, wanted: Callable[[Entry], bool]) -> list[Entry]:
        """Remove the backlog's entries for which ``wanted`` holds; them, in order."""
        taken: list[Entry] = []
        kept: deque[Entry] = deque()
        for entry in self.backlog:  # one pass: ``wanted`` is asked once per entry
            (taken if wanted(entry) else kept).append(entry)
        if taken:
            self.backlog = kept
        return taken

    def from_backlog(
        self, now_ms: int, running: int, budget: Optional[Budget] = None
    ) -> list[Entry]:
        """Backlog claims for this runner's idle workers (and what ``budget`` allows, see
        `within_capacity`); those past catch-up are dropped (another replica has run
        them, or nobody had a worker in time)."""
        idle = self.max_workers - running
        if idle > 0 and budget is not None:
            idle += budget.fits(list(itertools.islice(self.backlog, idle, idle + 500)), idle)
        batch: list[Entry] = []
        while self.backlog and len(batch) < idle:
            entry = self.backlog.popleft()
            options = entry.job.options
            late_ms = now_ms - entry.slot_ms
            allowed = options.catch_up_ms + options.jitter_ms + SCHEDULING_SLACK_MS
            if entry.kind == "claim" and late_ms > allowed:
                self.stats.add("slots_no_worker")
                logger.info(
                    "cronlock: job %r slot %d not claimed here: no worker of this runner was "
                    "free within catch-up (max_workers=%d)",
                    entry.job.key,
                    entry.slot_ms,
                    self.max_workers,
                )
                continue
            batch.append(entry)
        return batch
