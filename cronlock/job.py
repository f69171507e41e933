"""A registered job's handle; its options are [`JobOptions`][cronlock.options.JobOptions]."""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime
from typing import Any, Callable, Optional, Protocol

from cronlock.context import JobContext, ms_to_datetime
from cronlock.options import (
    DEFAULT_CATCH_UP_MS,
    OPTION_NAMES,
    OVERLAP_POLICIES,
    JobOptions,
    check_option_names,
    parse_options,
)
from cronlock.registrar import default_key, make_caller
from cronlock.schedules import Schedule

# The option table lives in cronlock.options, the registration helpers in
# cronlock.registrar; their names stay importable from here.
__all__ = [
    "DEFAULT_CATCH_UP_MS",
    "OPTION_NAMES",
    "OVERLAP_POLICIES",
    "Job",
    "JobControl",
    "JobOptions",
    "check_option_names",
    "default_key",
    "make_caller",
    "parse_options",
]


class JobControl(Protocol):
    """What a job handle asks of the runner that holds it."""

    def enable(self, job: Job) -> None:
        """Schedule ``job`` again in this runner."""

    def disable(self, job: Job) -> None:
        """Stop scheduling ``job`` in this runner."""

    def remove(self, job: Job) -> None:
        """Stop ``job`` and unregister it."""


class Job:
    """The handle of a registered job: ``start()``, ``stop()``, ``destroy()``, ``next_run``."""

    def __init__(
        self,
        control: JobControl,
        key: str,
        *,
        fn: Callable[..., Any],
        call: Callable[[JobContext], Any],
        schedule: Schedule,
        options: JobOptions,
    ) -> None:
        self.key = key
        self.func = fn
        self.call = call
        self.schedule = schedule
        self.options = options
        self._control = control
        self.enabled = True
        self.generation = 0  # bumped on stop/destroy: heap entries of older generations are dropped
        self.next_slot_ms: Optional[int] = None
        # This runner won the job's latest claimed slot: it claims the next one last
        # within the spread window, so the other replicas get their turn.
        self.won_last = False
        # The latest slot whose claim here found another replica's claim (taken, done,
        # stale): while that is recent, claims read the state first (see PROBE_FOR_MS).
        self.lost_slot_ms: Optional[int] = None
        # A worker's time on this job's last run (ms), or None: what a claim of it costs
        # the runner's capacity (see the scheduler's CLAIM_HORIZON_MS).
        self.busy_ms: Optional[float] = None
        self.tags: frozenset[Any] = frozenset()

    @property
    def next_run(self) -> Optional[datetime]:
        """When this runner will next try to claim a slot of the job (None if stopped/finished)."""
        if not self.enabled or self.next_slot_ms is None:
            return None
        return ms_to_datetime(self.next_slot_ms)

    def start(self) -> None:
        """Resume scheduling this job in this runner (it starts enabled)."""
        self._control.enable(self)

    def stop(self) -> None:
        """Stop scheduling this job in this runner; a running handler is not interrupted."""
        self._control.disable(self)

    def destroy(self) -> None:
        """Stop the job and unregister it, freeing its key for a new registration."""
        self._control.remove(self)

    def tag(self, *tags: Hashable) -> Job:
        """Add tags to `job.tags`; returns the job, so `every(...).do(fn).tag("x")` reads
        as in `schedule` (the same as `every(...).tag("x").do(fn)`)."""
        if not all(isinstance(t, Hashable) for t in tags):
            raise TypeError("Tags must be hashable")
        self.tags = self.tags | frozenset(tags)
        return self

    def __repr__(self) -> str:
        return f"Job({self.key!r}, {self.schedule.describe()})"
