"""The scheduling loop of a runner: claim what is due, act on each decision.

One thread sleeps on a `SlotQueue` (a heap of next
slots); it never polls every job. When entries fall due it claims them all through the
store (one round trip per batch), then carries out the decision
(`decide`) for each reply: start a
`Run`, re-check later, give the slot back, or nothing. On a
store error the job does not run (fail closed); the claim is retried, with the same owner
token, while the slot is within catch-up.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

from cronlock.clock import monotonic, utc_now
from cronlock.context import ErrorContext
from cronlock.errors import CorruptStateError, NotReplicated, RunAbandoned
from cronlock.job import Job
from cronlock.observers import notify
from cronlock.outcomes import ClaimStatus
from cronlock.runner.decisions import Action, Decision, decide
from cronlock.runner.host import RunnerHost
from cronlock.runner.requests import lately_lost, note_reply, read_first, slot_claim
from cronlock.runner.run import Run
from cronlock.runner.slots import Budget, Entry, RunTimes, SlotQueue
from cronlock.stores.types import ClaimReply, Replication

logger = logging.getLogger("cronlock")

# The scheduler never sleeps longer than this, so a wall clock that steps forward is
# noticed within this long. Idle cost stays one wake-up per period, whatever the number
# of jobs (at 5 s the wake-ups alone were measurable against APScheduler's idle cost).
MAX_SLEEP_S = 30.0
# A claim that failed on a store error is tried again after this, while within catch-up.
CLAIM_RETRY_MS = 1000
# Many jobs due together are claimed in pipelines of this many.
CLAIM_BATCH = 500
# The scheduler thread claims this long before an entry is due; a won run waits for its
# slot's boundary in its worker thread, so the claim's round trip is not part of the
# handler's start delay. (``run_pending`` never claims early.)
CLAIM_LEAD_MS = 5
# Beyond one claim per idle worker, a batch holds the claims the idle workers are expected
# to start within this long, judged by each job's last run here: 1,000 short jobs due
# together go out in a few pipelines instead of batches of 8, while jobs that keep a
# worker longer, or never ran here, are claimed one per idle worker, as before.
CLAIM_HORIZON_MS = 50
# Replies to a claim of a newer slot that leave the store holding that slot (or a newer
# one): a pending re-check of an older slot of the job could only answer ``stale``.
RECORDED = frozenset({ClaimStatus.WON, ClaimStatus.TAKEN, ClaimStatus.DONE, ClaimStatus.STALE})


class Scheduler:
    """The scheduler thread, the worker pool and the runs in progress of one runner.

    Args:
        host: the runner's shared services.
        jobs: the runner's registered jobs by key (read under ``cond``).
        cond: the runner's lock, notified when a job is added or a worker is free.
        max_workers: handlers that may run at once.
        replication: what claims wait for (``wait_replicas``), or None.
    """

    def __init__(
        self,
        host: RunnerHost,
        jobs: dict[str, Job],
        cond: threading.Condition,
        *,
        max_workers: int,
        replication: Optional[Replication],
    ) -> None:
        self.host = host
        self.jobs = jobs
        self.cond = cond
        self.max_workers = max_workers
        self.replication = replication
        self.slots = SlotQueue(host.stats, max_workers)
        self.running: set[Run] = set()
        self.run_times = RunTimes()
        self.thread: Optional[threading.Thread] = None
        self.pool: Optional[ThreadPoolExecutor] = None
        self.last_wake: Optional[float] = (
            None  # monotonic(): for health(), at least every MAX_SLEEP_S
        )
        #: Called in the scheduler thread before its first claim (the registry write, so
        #: a pause-all already set covers this runner's new jobs); must not raise.
        self.before_first_claim: Optional[Callable[[], None]] = None

    def now_ms(self) -> int:
        return round(self.host.clock.time() * 1000)

    # -- thread ---------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        thread = self.thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Seed the slots and start the threads (under ``cond``)."""
        self.slots.seed_all(self.jobs.values(), self.now_ms())
        self.pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="cronlock-worker")
        self.thread = threading.Thread(target=self.loop, name="cronlock-scheduler", daemon=True)
        self.thread.start()

    def loop(self) -> None:
        if self.before_first_claim is not None:
            self.before_first_claim()
        while True:
            self.last_wake = monotonic()
            with self.cond:
                if self.host.stopping:
                    return
                now_ms = self.now_ms()
                batch = self.slots.from_backlog(now_ms, len(self.running), self.budget())
                due = self.slots.next_due()
                claim_at = due - CLAIM_LEAD_MS if due is not None else None
                if claim_at is not None and claim_at <= now_ms:
                    batch += self.slots.pop_due(now_ms + CLAIM_LEAD_MS)
                elif not batch:
                    wait = (claim_at - now_ms) / 1000 if claim_at is not None else MAX_SLEEP_S
                    self.cond.wait(min(wait, MAX_SLEEP_S))  # or until a worker is free
                    continue
            try:
                self.process(batch, now_ms, inline=False)
            except Exception:  # the scheduler thread must never die
                logger.exception("cronlock: internal error in the scheduler loop")
            self.host.stats.tick(utc_now())

    def run_pending(self, now_ms: int) -> int:
        """One step in the caller's thread: claim and run every slot due at ``now_ms``."""
        with self.cond:
            if not self.slots.seeded:
                self.slots.seed_all(self.jobs.values(), now_ms)
            batch = self.slots.pop_due(now_ms, early=False)
        return self.process(batch, now_ms, inline=True)

    # -- claims -------------------------------------------------------------------------

    def process(self, batch: list[Entry], now_ms: int, *, inline: bool) -> int:
        """Claim every entry of ``batch`` (one round trip per chunk) and act on each reply."""
        with self.cond:
            claims = self.slots.to_claim(batch, now_ms)
            if not inline and any(lately_lost(entry) for entry in claims):
                # read the waiting claims in the same round trip: most went elsewhere
                claims = self.slots.take_backlog(lately_lost) + claims
        sent_at = monotonic()
        host = self.host
        claims, read = read_first(host.store, claims, host.holder, host.retention)
        if not inline:
            with self.cond:
                claims = self.slots.within_capacity(claims, len(self.running), self.budget())
        rechecks = sum(1 for entry in claims if entry.kind == "watch")
        rechecks += sum(1 for entry, _ in read if entry.kind == "watch")
        if rechecks:
            host.stats.add("rechecks", rechecks)
        # Every claim first, then the runs: starting handlers between chunks would let the
        # worker threads compete with the claims for the GIL (10,000 jobs due together).
        answered = [(entry, reply, sent_at) for entry, reply in read]
        for start in range(0, len(claims), CLAIM_BATCH):
            chunk = claims[start : start + CLAIM_BATCH]
            # Lease deadlines run on the monotonic clock, not the injected one.
            sent_at = monotonic()
            for entry, reply in zip(chunk, self.claim(chunk, now_ms)):
                if reply is not None:
                    answered.append((entry, reply, sent_at))
        return sum(
            self.on_reply(entry, reply, inline, sent_at) for entry, reply, sent_at in answered
        )

    def claim(self, entries: list[Entry], now_ms: int) -> list[Optional[ClaimReply]]:
        """Send the claims; on a store error the job does not run (fail closed)."""
        store = self.host.store
        try:
            replies = store.claim_slots(
                [slot_claim(e, self.host.holder, self.host.retention) for e in entries],
                self.replication,
            )
        except store.errors as exc:
            replies = [exc] * len(entries)
        out: list[Optional[ClaimReply]] = []
        for entry, reply in zip(entries, replies):
            if isinstance(reply, BaseException):
                self._claim_failed(entry, reply, now_ms)
                out.append(None)
            else:
                out.append(reply)
        return out

    def _claim_failed(self, entry: Entry, error: BaseException, now_ms: int) -> None:
        self.host.count("redis_errors")
        self.host.report(error, ErrorContext(entry.job.key, "acquire", entry.slot_ms))
        entry.early = False  # the retry comes after the boundary
        # Try the same slot again (same owner token, so a claim that was applied but
        # whose reply was lost is recognised as ours) while it is within catch-up.
        if now_ms + CLAIM_RETRY_MS - entry.slot_ms <= entry.job.options.catch_up_ms:
            with self.cond:
                self.slots.push(entry, now_ms + CLAIM_RETRY_MS)

    def on_reply(self, entry: Entry, reply: ClaimReply, inline: bool, sent_at: float) -> int:
        """Carry out the decision for one reply; 1 if a handler ran (or was started)."""
        decision = decide(reply, early=entry.early, replication=self.replication)
        job = entry.job
        if entry.kind == "claim":  # a scheduled slot's own claim (not a re-check)
            job.won_last = decision.action is Action.START
            note_reply(job, entry.slot_ms, reply.status)
            if reply.status in RECORDED:  # the store now holds this slot, not older ones
                with self.cond:
                    self.slots.settle(job.key, entry.slot_ms - 1)
        if decision.action is Action.ASK_AT_BOUNDARY:
            entry.early = False
            logger.debug(
                "cronlock: job %r slot %d busy before its boundary; asking again at it",
                job.key,
                entry.slot_ms,
            )
            with self.cond:
                self.slots.push(entry, entry.start_ms + CLAIM_LEAD_MS)
            return 0
        host = self.host
        if host.observers:
            notify(
                host.observers, "claimed", job.key, entry.slot_ms, decision.status, host.runner_id
            )
        for name in decision.counters:
            host.count(name)
        for slot_ms, attempt in reply.ended:
            self._ended_unfinished(job.key, slot_ms, attempt)
        if decision.action is Action.GIVE_BACK:
            self._give_back(entry, reply, sent_at)
        elif decision.action is Action.START:
            logger.debug(
                "cronlock: won job %r slot %d attempt %d", job.key, entry.slot_ms, reply.attempt
            )
            return self.launch(self._run_of(entry, reply, sent_at), inline)
        elif decision.action is Action.RECHECK:
            entry.kind = "watch"
            with self.cond:
                self.slots.push(entry, self.now_ms() + decision.recheck_in_ms)
        else:
            self._log_quiet(entry, reply, decision)
        return 0

    def _log_quiet(self, entry: Entry, reply: ClaimReply, decision: Decision) -> None:
        key = entry.job.key
        if decision.status is ClaimStatus.BUSY:
            logger.info(
                "cronlock: job %r slot %d skipped: the previous run is still going",
                key,
                entry.slot_ms,
            )
        elif decision.status is ClaimStatus.EXHAUSTED:
            self._abandoned(
                key,
                entry.slot_ms,
                reply.attempt,
                "max_attempts",
                f"its lease lapsed again after {reply.attempt} attempt(s) (max_attempts)",
            )
        elif decision.status is ClaimStatus.GONE:
            logger.warning(
                "cronlock: job %r slot %d not re-checked: its state is gone from the store "
                "(an empty restart?), so whether it finished is unknown; not starting it",
                key,
                entry.slot_ms,
            )
        elif decision.status is ClaimStatus.CORRUPT:
            self.host.report(
                CorruptStateError(
                    f"{self.host.store.state_location(key)} of job {key!r} holds data "
                    f"cronlock did not write ({reply.detail}); delete it or choose another "
                    "prefix"
                ),
                ErrorContext(key, "acquire", entry.slot_ms),
            )

    def _ended_unfinished(self, key: str, slot_ms: int, attempt: int) -> None:
        """An older run that this claim recorded as ended: its lease lapsed unfinished."""
        self.host.count("runs_abandoned")
        self._abandoned(
            key,
            slot_ms,
            attempt,
            "lease_lapsed",
            "its lease lapsed without a finish before a newer slot started",
        )

    def _abandoned(self, key: str, slot_ms: int, attempt: int, reason: str, why: str) -> None:
        """Tell on_error and the observers that a run of ``key`` ended without a finish."""
        host = self.host
        if host.observers:
            notify(host.observers, "abandoned", key, slot_ms, reason, host.runner_id)
        host.report(
            RunAbandoned(f"job {key!r} slot {slot_ms} attempt {attempt} abandoned: {why}"),
            ErrorContext(key, "abandoned", slot_ms, attempt),
        )

    def _give_back(self, entry: Entry, reply: ClaimReply, sent_at: float) -> None:
        """A won claim too few replicas have: do not run it; hand the slot straight back.

        A failover now could lose the claim and let another replica run the slot as well.
        The handover lets a replica whose claim does reach the replicas take the slot
        over (attempt + 1, up to ``max_attempts``); when none can, the slot is not run.
        """
        job = entry.job
        wanted = self.replication or Replication(0, 0)
        self.host.report(
            NotReplicated(
                f"job {job.key!r} slot {entry.slot_ms}: the claim reached {reply.replicas} "
                f"replica(s) within {wanted.timeout_ms} ms; wait_replicas is "
                f"{wanted.replicas}, so the run does not start"
            ),
            ErrorContext(job.key, "acquire", entry.slot_ms, reply.attempt),
        )
        self._run_of(entry, reply, sent_at).handover()

    def _run_of(self, entry: Entry, reply: ClaimReply, sent_at: float) -> Run:
        """The run a won claim starts (an early one waits for its boundary)."""
        return Run(
            self.host,
            entry.job,
            owner=entry.owner,
            attempt=reply.attempt,
            fence=reply.fence,
            sent_at=sent_at,
            slot_ms=entry.slot_ms,
            start_ms=entry.start_ms if entry.early else 0,
            on_end=self.run_ended,
        )

    # -- runs ---------------------------------------------------------------------------

    def launch(self, run: Run, inline: bool) -> int:
        """Start renewing a won run's lease and call its handler (a worker, or inline).

        A claim won while the runner is stopping is handed over at once: ``stop()`` has
        already cancelled the runs it knew of and would neither cancel nor await this one.
        """
        with self.cond:
            stopping = self.host.stopping and not inline
            if not stopping:
                self.running.add(run)
        if stopping:
            run.handover()
            return 0
        run.start_renewal()
        pool = self.pool
        if inline or pool is None:
            run.execute()
            return 1
        try:
            pool.submit(run.execute)
        except RuntimeError:  # pool shut down by stop(): hand the slot over at once
            run.handover()
            self.run_ended(run)
            return 0
        return 1

    def budget(self) -> Budget:
        """What a claim batch may hold beyond the idle workers (under ``cond``)."""
        return Budget(CLAIM_HORIZON_MS, self.run_times.longest())

    def run_ended(self, run: Run) -> None:
        with self.cond:
            self.running.discard(run)
            if run.busy_s is not None:
                run.job.busy_ms = run.busy_s * 1000
                self.run_times.add(run.job.busy_ms)
            if self.slots.backlog:
                # A worker is free for a waiting claim. (While the scheduler is busy this
                # is a no-op, so under load the waiting claims still go out in batches.)
                self.cond.notify()

    def settled(self, key: str, slot_ms: int) -> None:
        """Slot ``slot_ms`` of ``key`` finished elsewhere: a pending re-check is dropped."""
        with self.cond:
            self.slots.settle(key, slot_ms)

    def watch_now(self, key: str, slot_ms: int) -> None:
        """Claim ``slot_ms`` of ``key`` now (another replica handed it over)."""
        with self.cond:
            job = self.jobs.get(key)
            if job is None or not job.enabled or self.host.stopping or not self.slots.seeded:
                return
            self.slots.push_watch(job, slot_ms, self.now_ms())
            self.cond.notify()

    def job_added(self, job: Job) -> None:
        """Queue a new or re-enabled job's first slot, if the runner is scheduling."""
        with self.cond:
            if self.slots.seeded:
                self.slots.seed(job, self.now_ms())
                self.cond.notify()
