"""Runner counters, and the frozen snapshot ``runner.statistics()`` returns."""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Optional


@dataclass(frozen=True)
class RunnerStatistics:
    """A snapshot of one runner's counters since it was created."""

    claims_won: int = 0
    claims_lost: int = 0  # another replica ran (or runs) the slot
    claims_skipped: int = 0  # overlap "skip": the previous run was still going
    claims_paused: int = 0
    claims_unreplicated: int = 0  # won, but fewer replicas than wait_replicas had it: not run
    finishes_unreplicated: int = 0  # recorded, but fewer replicas than wait_replicas had it
    slots_missed: int = 0  # passed beyond catch-up (e.g. the process was paused)
    slots_failed: int = 0  # abandoned after max_attempts takeovers
    slots_forgotten: int = 0  # a re-check found the job's state gone (empty restart): not run
    rechecks: int = 0  # claims re-checking a slot that ran elsewhere (taken, handed over)
    rechecks_skipped: int = 0  # re-checks dropped unsent: the slot was known settled
    runs_abandoned: int = 0  # an older run's lease lapsed unfinished, recorded by this claim
    slots_no_worker: int = 0  # due, but no worker here was free within catch-up
    runs_succeeded: int = 0
    runs_failed: int = 0
    runs_cancelled: int = 0
    runs_timed_out: int = 0  # went past the job's timeout (also counted in runs_failed)
    takeovers: int = 0  # claims won with attempt > 1
    renew_failures: int = 0
    leases_lost: int = 0
    redis_errors: int = 0
    last_tick: Optional[datetime] = None


_COUNTERS = frozenset(f.name for f in fields(RunnerStatistics) if f.name != "last_tick")


class StatsCounter:
    """Thread-safe counters behind `RunnerStatistics`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._last_tick: Optional[datetime] = None

    def after_fork(self) -> None:
        """In a forked child: a new lock (a parent thread may have held this one)."""
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def tick(self, when: datetime) -> None:
        self._last_tick = when

    def snapshot(self) -> RunnerStatistics:
        with self._lock:
            return RunnerStatistics(last_tick=self._last_tick, **self._counts)
