"""The scheduling loop of a [`CronRunner`][cronlock.runner.CronRunner].

One thread sleeps on a heap of entries ``(due time, job, slot)``; it never polls every
job. When entries fall due it claims them all (pipelined, one round trip per batch),
then acts on each reply:

* ``won``: start a `Run` (a worker thread, or inline under
  ``run_pending``), whose lease the shared renewal thread keeps alive;
* ``taken``: look again when the holder's lease would lapse (one round trip per lease
  period per running job), or at once when the holder announces a handover;
* ``done``/``stale``/``busy``/``paused``: nothing to do for this slot;
* a Redis error: the job does not run (fail closed); the claim is retried, with the same
  owner token, while the slot is within catch-up.

After each slot the job's next slot is pushed, so the heap holds one entry per job.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import random
import secrets
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional, cast

from redis.exceptions import RedisError

from cronlock import _claims
from cronlock._keys import events_channel, job_key
from cronlock._run import Run
from cronlock._stats import StatsCounter
from cronlock.clock import Clock
from cronlock.context import ErrorContext
from cronlock.errors import CorruptStateError, NotReplicated
from cronlock.job import Job
from cronlock.observers import notify
from cronlock.outcomes import ClaimStatus

if TYPE_CHECKING:
    from cronlock.runner import CronRunner

logger = logging.getLogger("cronlock")

# The scheduler never sleeps longer than this, so a wall clock that steps forward is
# noticed within this long. Idle cost stays one wake-up per period, whatever the number
# of jobs (at 5 s the wake-ups alone were measurable against APScheduler's idle cost).
MAX_SLEEP_S = 30.0
# A slot popped this late (beyond catch-up and jitter) still counts as on time.
SCHEDULING_SLACK_MS = 1000
# A claim that failed on a Redis error is tried again after this, while within catch-up.
CLAIM_RETRY_MS = 1000
# Many jobs due together are claimed in pipelines of this many.
CLAIM_BATCH = 500
# Re-check a slot someone else runs this long after its lease deadline.
WATCH_MARGIN_MS = 50
# The scheduler thread claims this long before an entry is due; a won run waits for its
# slot's boundary in its worker thread, so the claim's round trip is not part of the
# handler's start delay. (``run_pending`` never claims early.)
CLAIM_LEAD_MS = 5
# What observers hear for a won claim that too few replicas acknowledged (wait_replicas).
UNREPLICATED = ClaimStatus.UNREPLICATED


@dataclass(order=True)
class _Entry:
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


class SchedulerLoop:
    """The scheduling half of [`CronRunner`][cronlock.runner.CronRunner] (its base class).

    It holds no state of its own: the attributes below are the runner's, set up in
    ``CronRunner.__init__`` and ``_init_threading_state``.
    """

    client: Any
    prefix: str
    clock: Clock
    holder: str
    runner_id: str
    observers: tuple[object, ...]
    replication: Optional[_claims.Replication]
    max_workers: int
    _jobs: dict[str, Job]
    _stats: StatsCounter
    _cond: threading.Condition
    _heap: list[_Entry]
    _backlog: deque[_Entry]  # due claims waiting for a free worker of this runner
    _seq: itertools.count[int]
    _seeded: bool
    _stopping: bool
    _pool: Optional[ThreadPoolExecutor]
    _running: set[Run]
    _last_wake: Optional[float]

    def _report(self, error: BaseException, context: ErrorContext) -> None:
        raise NotImplementedError

    def _history(self, key: str) -> _claims.HistoryOptions:
        raise NotImplementedError

    def _now_ms(self) -> int:
        return round(self.clock.time() * 1000)

    def _seed_all(self, now_ms: Optional[int] = None) -> None:
        now_ms = self._now_ms() if now_ms is None else now_ms
        self._heap.clear()
        for job in self._jobs.values():
            if job.enabled:
                self._seed(job, now_ms)
        self._seeded = True

    def _seed(self, job: Job, now_ms: int) -> None:
        """Queue the first slot: the latest one within catch-up, else the next one."""
        latest = job.schedule.latest_at_or_before(now_ms)
        if latest is not None and now_ms - latest <= job.options.catch_up_ms:
            self._push_slot(job, latest)
        else:
            self._push_slot(job, job.schedule.next_after(now_ms))

    def _push_slot(self, job: Job, slot_ms: Optional[int]) -> None:
        job.next_slot_ms = slot_ms
        if slot_ms is None:
            return
        jitter = random.randint(0, job.options.jitter_ms) if job.options.jitter_ms else 0
        heapq.heappush(
            self._heap,
            _Entry(slot_ms + jitter, next(self._seq), job, job.generation, slot_ms, "slot"),
        )

    def _push(self, entry: _Entry, due_ms: int) -> None:
        entry.due_ms = due_ms
        entry.seq = next(self._seq)
        heapq.heappush(self._heap, entry)

    def _pop_due(self, now_ms: int) -> list[_Entry]:
        batch = []
        while self._heap and self._heap[0].due_ms <= now_ms:
            batch.append(heapq.heappop(self._heap))
        return batch

    def _loop(self) -> None:
        while True:
            self._last_wake = time.monotonic()  # for health(): it wakes at least every MAX_SLEEP_S
            with self._cond:
                if self._stopping:
                    return
                now_ms = self._now_ms()
                batch = self._from_backlog(now_ms)
                claim_at = self._heap[0].due_ms - CLAIM_LEAD_MS if self._heap else None
                if claim_at is not None and claim_at <= now_ms:
                    batch += self._pop_due(now_ms + CLAIM_LEAD_MS)
                elif not batch:
                    wait = (claim_at - now_ms) / 1000 if claim_at is not None else MAX_SLEEP_S
                    self._cond.wait(min(wait, MAX_SLEEP_S))  # or until a worker is free
                    continue
            try:
                self._process(batch, now_ms, inline=False)
            except Exception:  # the scheduler thread must never die
                logger.exception("cronlock: internal error in the scheduler loop")
            self._stats.tick(datetime.now(timezone.utc))

    def _process(self, batch: list[_Entry], now_ms: int, *, inline: bool) -> int:
        """Claim every entry of ``batch`` (pipelined) and act on each reply."""
        claims: list[_Entry] = []
        with self._cond:
            for entry in batch:
                job = entry.job
                if entry.generation != job.generation or not job.enabled:
                    continue
                if entry.kind == "slot":
                    slot = self._due_slot(job, entry.slot_ms, now_ms)
                    self._push_slot(
                        job, job.schedule.next_after(max(entry.slot_ms, slot or now_ms))
                    )
                    if slot is None:
                        self._stats.add("slots_missed")
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
            if not inline:
                claims = self._within_capacity(claims)
        # Every claim first, then the runs: starting handlers between chunks would let the
        # worker threads compete with the claims for the GIL (10,000 jobs due together).
        answered: list[tuple[_Entry, _claims.ClaimReply, float]] = []
        for start in range(0, len(claims), CLAIM_BATCH):
            chunk = claims[start : start + CLAIM_BATCH]
            # Leases run on real time (Redis's clock), not the injected clock.
            sent_at = time.monotonic()
            for entry, reply in zip(chunk, self._claim(chunk, now_ms)):
                if reply is not None:
                    answered.append((entry, reply, sent_at))
        return sum(
            self._on_reply(entry, reply, inline, sent_at) for entry, reply, sent_at in answered
        )

    def _within_capacity(self, claims: list[_Entry]) -> list[_Entry]:
        """The claims to send now: as many as this runner has idle workers.

        A replica that won more slots than it has workers would start the rest late
        (and their next slots would find them busy) while other replicas' workers sat
        idle. The others wait in the backlog, in order, for a worker of this runner to
        be free; meanwhile a replica with idle workers claims them. Called under the lock.
        """
        idle = self.max_workers - len(self._running)
        if len(claims) <= idle:
            return claims
        send, wait = claims[: max(idle, 0)], claims[max(idle, 0) :]
        for entry in wait:
            entry.early = False  # claimed after its boundary now
        self._backlog.extend(wait)
        logger.debug("cronlock: %d claim(s) wait for a free worker", len(wait))
        return send

    def _from_backlog(self, now_ms: int) -> list[_Entry]:
        """Backlog claims for this runner's idle workers; those past catch-up are dropped
        (another replica has run them, or nobody had a worker in time). Under the lock."""
        idle = self.max_workers - len(self._running)
        batch: list[_Entry] = []
        while self._backlog and len(batch) < idle:
            entry = self._backlog.popleft()
            options = entry.job.options
            late_ms = now_ms - entry.slot_ms
            allowed = options.catch_up_ms + options.jitter_ms + SCHEDULING_SLACK_MS
            if entry.kind == "claim" and late_ms > allowed:
                self._stats.add("slots_no_worker")
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

    def _due_slot(self, job: Job, slot_ms: int, now_ms: int) -> Optional[int]:
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

    def _request(self, entry: _Entry) -> _claims.ClaimRequest:
        job = entry.job
        return _claims.ClaimRequest(
            state_key=job_key(self.prefix, job.key),
            slot_ms=entry.slot_ms,
            owner=entry.owner,
            lease_ms=job.options.ttl_ms,
            max_attempts=job.options.max_attempts,
            overlap=job.options.overlap,
            holder=self.holder,
            history=self._history(job.key),
        )

    def _claim(self, entries: list[_Entry], now_ms: int) -> list[Optional[_claims.ClaimReply]]:
        """Send the claims; on a Redis error the job does not run (fail closed)."""
        requests = [self._request(e) for e in entries]
        try:
            if len(requests) == 1:
                replies: list[Any] = [_claims.claim(self.client, requests[0], self.replication)]
            else:
                replies = _claims.claim_many(self.client, requests, self.replication)
        except RedisError as exc:
            replies = [exc] * len(entries)
        out: list[Optional[_claims.ClaimReply]] = []
        for entry, reply in zip(entries, replies):
            if isinstance(reply, BaseException):
                self._claim_failed(entry, reply, now_ms)
                out.append(None)
            else:
                out.append(reply)
        return out

    def _claim_failed(self, entry: _Entry, error: BaseException, now_ms: int) -> None:
        self._stats.add("redis_errors")
        self._report(error, ErrorContext(entry.job.key, "acquire", entry.slot_ms))
        entry.early = False  # the retry comes after the boundary
        # Try the same slot again (same owner token, so a claim that was applied but
        # whose reply was lost is recognised as ours) while it is within catch-up.
        if now_ms + CLAIM_RETRY_MS - entry.slot_ms <= entry.job.options.catch_up_ms:
            with self._cond:
                self._push(entry, now_ms + CLAIM_RETRY_MS)

    def _on_reply(
        self, entry: _Entry, reply: _claims.ClaimReply, inline: bool, sent_at: float
    ) -> int:
        job = entry.job
        status = reply.status
        if status == _claims.WON and self._unreplicated(reply):
            status = UNREPLICATED
        if status == _claims.BUSY and entry.early:
            # Claimed early: the previous run may still end before the boundary. Ask again
            # then, so the answer is the one a claim at the boundary gets.
            entry.early = False
            logger.debug(
                "cronlock: job %r slot %d busy before its boundary; asking again at it",
                job.key,
                entry.slot_ms,
            )
            with self._cond:
                self._push(entry, entry.start_ms + CLAIM_LEAD_MS)
            return 0
        if self.observers:
            notify(self.observers, "claimed", job.key, entry.slot_ms, status, self.runner_id)
        if status == UNREPLICATED:
            self._give_back(entry, reply, sent_at)
        elif status == _claims.WON:
            self._stats.add("claims_won")
            if reply.attempt > 1:
                self._stats.add("takeovers")
            logger.debug(
                "cronlock: won job %r slot %d attempt %d", job.key, entry.slot_ms, reply.attempt
            )
            return self._launch(self._run_of(entry, reply, sent_at), inline)
        if status == _claims.TAKEN:
            self._stats.add("claims_lost")
            # Look again when the holder's lease would lapse: one round trip per lease period.
            wait_ms = max(0, reply.lease_until_ms - reply.server_now_ms) + WATCH_MARGIN_MS
            entry.kind = "watch"
            with self._cond:
                self._push(entry, self._now_ms() + wait_ms)
        elif status in (_claims.DONE, _claims.STALE):
            self._stats.add("claims_lost")
        elif status == _claims.BUSY:
            self._stats.add("claims_skipped")
            logger.info(
                "cronlock: job %r slot %d skipped: the previous run is still going",
                job.key,
                entry.slot_ms,
            )
        elif status == _claims.PAUSED:
            self._stats.add("claims_paused")
        elif status == _claims.EXHAUSTED:
            self._stats.add("slots_failed")
            logger.warning(
                "cronlock: job %r slot %d abandoned: its lease lapsed again after %d attempts",
                job.key,
                entry.slot_ms,
                reply.attempt,
            )
        elif status == _claims.CORRUPT:
            self._report(
                CorruptStateError(
                    f"key {job_key(self.prefix, job.key)!r} of job {job.key!r} holds data cronlock "
                    f"did not write ({reply.detail}); delete it or choose another prefix"
                ),
                ErrorContext(job.key, "acquire", entry.slot_ms),
            )
        return 0

    def _unreplicated(self, reply: _claims.ClaimReply) -> bool:
        return self.replication is not None and reply.replicas < self.replication.replicas

    def _give_back(self, entry: _Entry, reply: _claims.ClaimReply, sent_at: float) -> None:
        """A won claim too few replicas have: do not run it; hand the slot straight back.

        A failover now could lose the claim and let another replica run the slot as well.
        The handover lets a replica whose claim does reach the replicas take the slot
        over (attempt + 1, up to ``max_attempts``); when none can, the slot is not run.
        """
        job = entry.job
        wanted = self.replication or _claims.Replication(0, 0)
        self._stats.add("claims_unreplicated")
        self._report(
            NotReplicated(
                f"job {job.key!r} slot {entry.slot_ms}: the claim reached {reply.replicas} "
                f"replica(s) within {wanted.timeout_ms} ms; wait_replicas is "
                f"{wanted.replicas}, so the run does not start"
            ),
            ErrorContext(job.key, "acquire", entry.slot_ms, reply.attempt),
        )
        self._run_of(entry, reply, sent_at).handover()

    def _run_of(self, entry: _Entry, reply: _claims.ClaimReply, sent_at: float) -> Run:
        """The run a won claim starts (an early one waits for its boundary)."""
        return Run(
            cast("CronRunner", self),
            entry.job,
            state_key=job_key(self.prefix, entry.job.key),
            owner=entry.owner,
            reply=reply,
            sent_at=sent_at,
            slot_ms=entry.slot_ms,
            start_ms=entry.start_ms if entry.early else 0,
        )

    def _launch(self, run: Run, inline: bool) -> int:
        """Start renewing a won run's lease and call its handler (a worker, or inline).

        A claim won while the runner is stopping is handed over at once: ``stop()`` has
        already cancelled the runs it knew of and would neither cancel nor await this one.
        """
        with self._cond:
            stopping = self._stopping and not inline
            if not stopping:
                self._running.add(run)
        if stopping:
            run.handover()
            return 0
        run.start_renewal()
        if inline or self._pool is None:
            run.execute()
            return 1
        try:
            self._pool.submit(run.execute)
        except RuntimeError:  # pool shut down by stop(): hand the slot over at once
            run.handover()
            self._run_ended(run)
            return 0
        return 1

    def _announce_handover(self, key: str, slot_ms: int) -> None:
        """Tell the other replicas a lease was ended early, so one takes the slot at once.

        Without this they would look again only when the lease they last saw lapses
        (up to a whole ttl later), and a newer slot may have replaced it by then.
        """
        message = json.dumps({"type": "handover", "key": key, "slot": slot_ms})
        try:
            self.client.publish(events_channel(self.prefix), message)
        except RedisError as exc:  # they still find the slot when the old lease lapses
            self._report(exc, ErrorContext(key, "release", slot_ms))

    def _watch_now(self, key: str, slot_ms: int) -> None:
        """Claim ``slot_ms`` of ``key`` now (another replica handed it over)."""
        with self._cond:
            job = self._jobs.get(key)
            if job is None or not job.enabled or self._stopping or not self._seeded:
                return
            now_ms = self._now_ms()
            heapq.heappush(
                self._heap, _Entry(now_ms, next(self._seq), job, job.generation, slot_ms, "watch")
            )
            self._cond.notify()

    def _run_ended(self, run: Run) -> None:
        with self._cond:
            self._running.discard(run)
            if self._backlog:
                # A worker is free for a waiting claim. (While the scheduler is busy this
                # is a no-op, so under load the waiting claims still go out in batches.)
                self._cond.notify()
