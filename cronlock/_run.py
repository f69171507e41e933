"""One won claim being carried out: the handler call, its lease renewal, its finish.

Timeline of a run (the owner's view):

```text
claim ──won──> renew every ttl/3 (shared renewal thread) ──> finish(done|failed)
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
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Optional

from redis.exceptions import RedisError

from cronlock import _claims
from cronlock.context import ErrorContext, JobContext
from cronlock.errors import JobCancelled, JobTimeout
from cronlock.lock.renewer import get_deadlines, get_renewer
from cronlock.observers import RunRecord, format_traceback, notify
from cronlock.outcomes import RUN_OUTCOMES, RunKind, RunOutcome

if TYPE_CHECKING:
    from cronlock.job import Job
    from cronlock.runner import CronRunner

logger = logging.getLogger("cronlock")

_FINISH_RETRY_S = 0.2


class Run:
    """The execution of one slot by this replica."""

    def __init__(
        self,
        runner: CronRunner,
        job: Job,
        *,
        state_key: str,
        owner: str,
        reply: _claims.ClaimReply,
        sent_at: float,
        slot_ms: int,
        kind: RunKind = RunKind.SCHEDULED,
        start_ms: int = 0,
    ) -> None:
        self.runner = runner
        self.start_ms = start_ms  # runner-clock ms before which the handler must not start
        self.kind = kind  # SCHEDULED, or MANUAL for a triggered run
        self.history = runner._history(job.key)
        self.job = job
        self.state_key = state_key
        self.owner = owner
        self.lease_s = job.options.ttl_ms / 1000
        # ``sent_at`` is the time.monotonic() taken before the claim was sent, so our idea
        # of the deadline is never later than Redis's.
        self.deadline = sent_at + self.lease_s
        self.ctx = JobContext(
            key=job.key,
            slot_ms=slot_ms,
            attempt=reply.attempt,
            fencing_token=reply.fence,
            payload=job.options.payload,
            runner_id=runner.runner_id,
        )
        self.lost = False
        self.error: Optional[BaseException] = None
        self.finished = threading.Event()
        self._started = time.monotonic()
        self._closed = False  # no more renewals
        self._returned = False  # the handler has returned (a timeout no longer applies)
        self._lock = threading.Lock()

    # -- renewal (called from the shared renewal thread) --------------------------------

    def start_renewal(self) -> None:
        get_renewer().schedule(self, time.monotonic() + self.lease_s / 3)
        get_deadlines().schedule(_LeaseWatch(self), self.deadline)

    def renew_due(self) -> Optional[float]:
        with self._lock:
            if self._closed or self.lost:
                return None
        sent = time.monotonic()
        try:
            until = _claims.renew(
                self.runner.client,
                self.state_key,
                self.ctx.slot_ms,
                self.owner,
                self.job.options.ttl_ms,
            )
        except RedisError as exc:
            self.runner._count("renew_failures")
            self.runner._report(exc, self._error_context("renew"))
            now = time.monotonic()
            if now >= self.deadline:
                self._lose("its lease ran out while Redis was unreachable")
                return None
            return now + min(self.lease_s / 3, max(0.05, (self.deadline - now) / 2))
        if until is None:
            with self._lock:
                if self._closed:  # the run finished while this renewal was on its way
                    return None
            self._lose("another replica took the slot over, or a newer slot replaced it")
            return None
        self.deadline = sent + self.lease_s
        return sent + self.lease_s / 3

    def _lose(self, why: str) -> None:
        with self._lock:
            if self.lost:  # the lease watch and a failed renewal may both find it
                return
            self.lost = True
        self.runner._count("leases_lost")
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
        observers = self.runner.observers
        try:
            if self._wait_for_start():  # stopped before its boundary: the handler never ran
                self.close()
                self._finish(RunOutcome.CANCELLED)
                return
            started_at = datetime.now(timezone.utc)
            self._started = time.monotonic()
            timeout_ms = self.job.options.timeout_ms
            if timeout_ms:
                get_deadlines().schedule(_Timeout(self), self._started + timeout_ms / 1000)
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
            self.finished.set()
            self.runner._run_ended(self)

    def _wait_for_start(self) -> bool:
        """Wait for the slot's boundary on the runner's clock (the claim was sent a little
        early); True if the run was cancelled meanwhile."""
        clock = self.runner.clock
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
        self.runner._count("runs_timed_out")
        self.error = JobTimeout(
            f"job {self.job.key!r} slot {self.ctx.slot.isoformat()} attempt {self.ctx.attempt} "
            f"ran past its timeout of {self.job.options.timeout_ms / 1000:g} s"
        )
        self.runner._report(self.error, self._error_context("handler"))
        return RunOutcome.FAILED

    def time_out(self) -> None:
        """The job's timeout has passed (the renewal thread calls this): cancel the run."""
        with self._lock:
            if self._returned:
                return
            self.ctx.timed_out.set()
        logger.warning(
            "cronlock: job %r slot %s attempt %d ran past its timeout of %g s; cancelling it "
            "(its lease is renewed until the handler returns)",
            self.job.key,
            self.ctx.slot.isoformat(),
            self.ctx.attempt,
            self.job.options.timeout_ms / 1000,
        )
        self.ctx.cancelled.set()

    def _call_with_retries(self) -> RunOutcome:
        options = self.job.options
        for attempt in range(options.retries + 1):
            try:
                self.job.call(self.ctx)
            except JobCancelled:
                return RunOutcome.CANCELLED
            except Exception as exc:
                self.error = exc
                self.runner._report(exc, self._error_context("handler"))
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
            self.runner._count(counter)
        if self.lost:
            return  # a successor owns the slot: finishing would only be refused
        if outcome is RunOutcome.CANCELLED and not self.runner._stopping:
            return  # handed over only while stopping; otherwise the lease was lost
        while True:
            try:
                ok = self._send_finish(outcome)
            except RedisError as exc:
                self.runner._report(exc, self._error_context("release"))
                if time.monotonic() + _FINISH_RETRY_S >= self.deadline:
                    return  # the lease lapses; another replica may run the slot again
                time.sleep(_FINISH_RETRY_S)
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
        except RedisError as exc:
            self.runner._report(exc, self._error_context("release"))

    def _send_finish(self, outcome: RunOutcome) -> bool:
        """Record the run's end (one round trip); False when the slot is no longer ours.

        A cancelled run's finish is a handover (its lease ends now); one that Redis
        accepted is also announced, so another replica takes the slot at once.
        """
        word = RUN_OUTCOMES[outcome].finish
        assert word is not None, outcome
        ok = _claims.finish(
            self.runner.client,
            self.state_key,
            self.ctx.slot_ms,
            self.owner,
            word,
            history=self.history,
            info=self._finish_info(outcome),
        )
        if ok and outcome is RunOutcome.CANCELLED:
            self.runner._announce_handover(self.job.key, self.ctx.slot_ms)
        return ok

    def _finish_info(self, outcome: RunOutcome) -> _claims.FinishInfo:
        """What the history entry of this run's end records besides the outcome."""
        error = self.error if outcome is RunOutcome.FAILED else None
        return _claims.FinishInfo(
            attempt=self.ctx.attempt,
            fence=self.ctx.fencing_token,
            holder=self.runner.holder,
            duration_ms=round((time.monotonic() - self._started) * 1000),
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
            holder=self.runner.holder,
            runner_id=self.runner.runner_id,
            status=status,
            started_at=started_at,
            finished_at=datetime.now(timezone.utc),
            error_type=type(error).__name__ if error is not None else None,
            traceback=format_traceback(error) if error is not None else None,
        )

    def _error_context(self, phase: str) -> ErrorContext:
        return ErrorContext(self.job.key, phase, self.ctx.slot_ms, self.ctx.attempt)


class _LeaseWatch:
    """A run's lease deadline on the deadline heap: the run is cancelled when it passes,
    even while a renewal waits on a Redis that does not answer."""

    __slots__ = ("run",)

    def __init__(self, run: Run) -> None:
        self.run = run

    def renew_due(self) -> Optional[float]:
        run = self.run
        with run._lock:
            if run._closed or run.lost:
                return None
        deadline = run.deadline  # moved on by every renewal that reached Redis in time
        if time.monotonic() < deadline:
            return deadline
        run._lose("its lease ran out before a renewal reached Redis")
        return None


class _Timeout:
    """A run's timeout, due on the deadline heap (no thread per run, never behind a
    renewal that waits for Redis)."""

    __slots__ = ("run",)

    def __init__(self, run: Run) -> None:
        self.run = run

    def renew_due(self) -> Optional[float]:
        self.run.time_out()
        return None
