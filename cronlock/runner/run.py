"""One won claim being carried out: the handler call, its lease renewal, its finish.

Timeline of a run (the owner's view):

```text
claim ──won──> renew every heartbeat, default ttl/3 (its server's thread) ──> finish(done|failed)
                    │ renew says "lost" (taken over / replaced) or the lease ran out
                    │ while Redis was unreachable
                    └──> ctx.cancelled is set; finish would say "lost": skipped
runner.stop() ──> ctx.cancelled is set; a handler that gives up (raises) is
                  finished as "handover", so another replica takes the slot at once
```
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Callable, Optional

from cronlock.clock import monotonic, sleep, utc_now
from cronlock.context import ErrorContext, JobContext
from cronlock.errors import FinishNotReplicated, JobCancelled, JobTimeout
from cronlock.job import Job
from cronlock.lock.renewer import get_deadlines, get_renewer
from cronlock.observers import RunRecord, format_traceback, notify
from cronlock.outcomes import RUN_OUTCOMES, RunKind, RunOutcome
from cronlock.runner.host import RunnerHost
from cronlock.stores.types import FinishInfo

logger = logging.getLogger("cronlock")

_FINISH_RETRY_S = 0.2


class Run:
    """The execution of one slot by this replica."""

    def __init__(
        self,
        host: RunnerHost,
        job: Job,
        *,
        owner: str,
        attempt: int,
        fence: int,
        sent_at: float,
        slot_ms: int,
        on_end: Callable[[Run], None],
        kind: RunKind = RunKind.SCHEDULED,
        start_ms: int = 0,
        trigger_id: Optional[str] = None,
    ) -> None:
        self.host = host
        self.on_end = on_end  # told when the run is over (its worker is free)
        self.start_ms = start_ms  # runner-clock ms before which the handler must not start
        self.kind = kind  # SCHEDULED, or MANUAL for a triggered run
        self.job = job
        self.owner = owner
        self.lease_s = job.options.ttl_ms / 1000
        self.heartbeat_s = job.options.renew_every_ms / 1000
        # ``sent_at`` is the monotonic() taken before the claim was sent, so our idea
        # of the deadline is never later than the store's.
        self.deadline = sent_at + self.lease_s
        self.ctx = JobContext(
            key=job.key,
            slot_ms=slot_ms,
            attempt=attempt,
            fencing_token=fence,
            payload=job.options.payload,
            runner_id=host.runner_id,
            kind=str(kind),
            trigger_id=trigger_id,
        )
        self.lost = False
        self.error: Optional[BaseException] = None
        self.finished = threading.Event()
        self._started = monotonic()
        self.busy_s: Optional[float] = None  # the worker's time on the run, once it ended
        self._closed = False  # no more renewals
        self._returned = False  # the handler has returned (a timeout no longer applies)
        self._lock = threading.Lock()

    # -- renewal (called from the store's renewal thread) --------------------------------

    def start_renewal(self) -> None:
        """Renew from the store's server's thread: one hung on another server delays nothing."""
        get_renewer(self.host.store).schedule(self, monotonic() + self.heartbeat_s)
        get_deadlines().schedule(LeaseWatch(self), self.deadline)

    @property
    def renewing(self) -> bool:
        """Still renewing: neither closed (finished) nor lost."""
        with self._lock:
            return not (self._closed or self.lost)

    def renew_due(self) -> Optional[float]:
        """Renew the lease now (the store's renewal thread calls this); the next time."""
        if not self.renewing:
            return None
        store = self.host.store
        sent = monotonic()
        try:
            until = store.renew(self.job.key, self.ctx.slot_ms, self.owner, self.job.options.ttl_ms)
        except store.errors as exc:
            self.host.count("renew_failures")
            self.host.report(exc, self._error_context("renew"))
            now = monotonic()
            if now >= self.deadline:
                self.lose("its lease ran out while Redis was unreachable")
                return None
            return now + min(self.heartbeat_s, max(0.05, (self.deadline - now) / 2))
        if until is None:
            with self._lock:
                if self._closed:  # the run finished while this renewal was on its way
                    return None
            self.lose("another replica took the slot over, or a newer slot replaced it")
            return None
        self.deadline = sent + self.lease_s
        return sent + self.heartbeat_s

    def lose(self, why: str) -> None:
        """The lease is gone (taken over, replaced, or ran out): cancel the run."""
        with self._lock:
            if self.lost:  # the lease watch and a failed renewal may both find it
                return
            self.lost = True
        self.host.count("leases_lost")
        logger.warning(
            "cronlock: lost the lease of job %r slot %s attempt %d: %s; cancelling the run",
            self.job.key,
            self.ctx.slot.isoformat(),
            self.ctx.attempt,
            why,
        )
        self.ctx.cancelled.set()

    def close(self) -> None:
        """Stop renewing (the renewal thread drops this run at its next due time)."""
        with self._lock:
            self._closed = True

    # -- execution (a worker thread, or inline under run_pending) -----------------------

    def execute(self) -> None:
        """Call the handler (with retries), then record the outcome. Never raises."""
        observers = self.host.observers
        began: Optional[float] = None
        try:
            if self._wait_for_start():  # stopped before its boundary: the handler never ran
                self.close()
                self._finish(RunOutcome.CANCELLED)
                return
            started_at = utc_now()
            self._started = monotonic()
            began = self._started
            timeout_ms = self.job.options.timeout_ms
            if timeout_ms:
                get_deadlines().schedule(Timeout(self), self._started + timeout_ms / 1000)
            if observers:
                notify(observers, "run_started", self.ctx, started_at)
            outcome = self._call_handler()
            # Stop renewing first: a renewal racing the finish would find the slot done
            # and report a lease "lost" that was in fact handed back.
            self.close()
            self._finish(outcome)
            if observers:
                notify(observers, "run_finished", self._record(outcome, started_at))
        except Exception:  # defensive: nothing may escape into a worker thread
            logger.exception("cronlock: internal error running job %r", self.job.key)
        finally:
            self.close()
            if began is not None:  # handler and finish: what the claim capacity learns from
                self.busy_s = monotonic() - began
            self.finished.set()
            self.on_end(self)

    def _wait_for_start(self) -> bool:
        """Wait for the slot's boundary on the runner's clock (the claim was sent a little
        early); True if the run was cancelled meanwhile."""
        clock = self.host.clock
        while True:
            early_s = self.start_ms / 1000 - clock.time()
            if early_s <= 0:
                return False
            if self.ctx.cancelled.wait(early_s):
                return True

    def _call_handler(self) -> RunOutcome:
        """The handler's outcome: SUCCEEDED, FAILED (also past its timeout) or CANCELLED."""
        outcome = self._call_with_retries()
        with self._lock:
            self._returned = True  # a timeout firing from now on is too late
        if not self.ctx.timed_out.is_set():
            return outcome
        self.host.count("runs_timed_out")
        self.error = JobTimeout(
            f"job {self.job.key!r} slot {self.ctx.slot.isoformat()} attempt {self.ctx.attempt} "
            f"ran past its timeout of {self.job.options.timeout_ms / 1000:g} s"
        )
        self.host.report(self.error, self._error_context("handler"))
        return RunOutcome.FAILED

    def time_out(self) -> None:
        """The job's timeout has passed (the deadline thread calls this): cancel the run."""
        with self._lock:
            if self._returned:
                return
            # Cancelled first, both under the lock: whoever sees timed_out also sees
            # cancelled, and a handler that returns on the cancellation finds timed_out
            # set once it takes the lock (so its outcome is "failed", not "cancelled").
            self.ctx.cancelled.set()
            self.ctx.timed_out.set()
        logger.warning(
            "cronlock: job %r slot %s attempt %d ran past its timeout of %g s; cancelling it "
            "(its lease is renewed until the handler returns)",
            self.job.key,
            self.ctx.slot.isoformat(),
            self.ctx.attempt,
            self.job.options.timeout_ms / 1000,
        )

    def _call_with_retries(self) -> RunOutcome:
        options = self.job.options
        for attempt in range(options.retries + 1):
            try:
                self.job.call(self.ctx)
            except JobCancelled:
                return RunOutcome.CANCELLED
            except Exception as exc:
                self.error = exc
                self.host.report(exc, self._error_context("handler"))
                if self.ctx.cancelled.is_set():
                    return RunOutcome.CANCELLED
                if attempt == options.retries:
                    return RunOutcome.FAILED
                delay = options.retry_backoff_ms / 1000 * (2**attempt)
                if self.ctx.cancelled.wait(delay):
                    return RunOutcome.CANCELLED
            else:
                return RunOutcome.SUCCEEDED
        return RunOutcome.FAILED  # pragma: no cover - the loop always returns

    def _finish(self, outcome: RunOutcome) -> None:
        counter = RUN_OUTCOMES[outcome].counter
        if counter is not None:
            self.host.count(counter)
        if self.lost:
            return  # a successor owns the slot: finishing would only be refused
        if outcome is RunOutcome.CANCELLED and not self.host.stopping:
            return  # handed over only while stopping; otherwise the lease was lost
        while True:
            try:
                ok = self._send_finish(outcome)
            except self.host.store.errors as exc:
                self.host.report(exc, self._error_context("release"))
                if monotonic() + _FINISH_RETRY_S >= self.deadline:
                    return  # the lease lapses; another replica may run the slot again
                sleep(_FINISH_RETRY_S)
                continue
            if not ok:
                logger.warning(
                    "cronlock: job %r slot %s attempt %d ended after another owner took the "
                    "slot; its outcome (%s) was not recorded",
                    self.job.key,
                    self.ctx.slot.isoformat(),
                    self.ctx.attempt,
                    outcome,
                )
            return

    def handover(self) -> None:
        """End the lease now (stopping, handler still busy): another replica may take over."""
        self.close()
        if self.lost or self.finished.is_set():
            return
        try:
            self._send_finish(RunOutcome.CANCELLED)
        except self.host.store.errors as exc:
            self.host.report(exc, self._error_context("release"))

    def _send_finish(self, outcome: RunOutcome) -> bool:
        """Record the run's end (one round trip); False when the slot is no longer ours.

        A cancelled run's finish is a handover (its lease ends now); one that Redis
        accepted is also announced, so another replica takes the slot at once. With
        ``wait_replicas`` a done or failed finish waits for the replicas as claims do; one
        they did not all acknowledge is logged (WARNING) and counted, and is over all the same.
        """
        word = RUN_OUTCOMES[outcome].finish
        assert word is not None, outcome
        host = self.host
        # A handover does not wait: lost in a failover, its slot is taken over once the
        # lease lapses, which is what handing it over asked for (just later).
        handover = outcome is RunOutcome.CANCELLED
        waits = {} if host.replication is None or handover else {"replication": host.replication}
        try:
            ok = host.store.finish(
                self.job.key,
                self.ctx.slot_ms,
                self.owner,
                word,
                retention=host.retention,
                info=self._finish_info(outcome),
                **waits,
            )
        except FinishNotReplicated as short:  # recorded on the master: not sent again
            ok = True
            host.count("finishes_unreplicated")
            logger.warning(
                "cronlock: the finish (%s) of job %r slot %s attempt %d reached %d of %d "
                "replicas within wait_timeout; a failover now could run the slot again",
                word,
                self.job.key,
                self.ctx.slot.isoformat(),
                self.ctx.attempt,
                short.replicas,
                short.wanted,
            )
        if ok and outcome is RunOutcome.CANCELLED:
            self.host.announce_handover(self.job.key, self.ctx.slot_ms)
        return ok

    def _finish_info(self, outcome: RunOutcome) -> FinishInfo:
        """What the history entry of this run's end records besides the outcome."""
        error = self.error if outcome is RunOutcome.FAILED else None
        return FinishInfo(
            attempt=self.ctx.attempt,
            fence=self.ctx.fencing_token,
            holder=self.host.holder,
            duration_ms=round((monotonic() - self._started) * 1000),
            error_type=type(error).__name__ if error is not None else "",
            traceback=format_traceback(error) if error is not None else "",
            kind=self.kind,
        )

    def _record(self, outcome: RunOutcome, started_at: datetime) -> RunRecord:
        status = RunOutcome.LOST if self.lost else outcome
        error = self.error if status is RunOutcome.FAILED else None
        return RunRecord(
            key=self.job.key,
            slot=self.ctx.slot,
            attempt=self.ctx.attempt,
            fencing_token=self.ctx.fencing_token,
            holder=self.host.holder,
            runner_id=self.host.runner_id,
            status=status,
            started_at=started_at,
            finished_at=utc_now(),
            error_type=type(error).__name__ if error is not None else None,
            traceback=format_traceback(error) if error is not None else None,
            kind=self.kind,
            trigger_id=self.ctx.trigger_id,
        )

    def _error_context(self, phase: str) -> ErrorContext:
        return ErrorContext(self.job.key, phase, self.ctx.slot_ms, self.ctx.attempt)


class LeaseWatch:
    """A run's lease deadline on the deadline heap: the run is cancelled when it passes,
    even while a renewal waits on a store that does not answer."""

    __slots__ = ("run",)

    def __init__(self, run: Run) -> None:
        self.run = run

    def deadline_passed(self) -> Optional[float]:
        """The lease deadline has come: lose the run, unless a renewal moved it on."""
        run = self.run
        if not run.renewing:
            return None
        deadline = run.deadline  # moved on by every renewal that reached the store in time
        if monotonic() < deadline:
            return deadline
        run.lose("its lease ran out before a renewal reached Redis")
        return None


class Timeout:
    """A run's timeout, due on the deadline heap (no thread per run, never behind a
    renewal that waits for the store)."""

    __slots__ = ("run",)

    def __init__(self, run: Run) -> None:
        self.run = run

    def deadline_passed(self) -> Optional[float]:
        """The timeout has passed: cancel the run."""
        self.run.time_out()
        return None
