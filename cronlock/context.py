"""What a handler sees (`JobContext`) and what ``on_error`` is told (`ErrorContext`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

from cronlock.errors import JobCancelled, JobTimeout

PHASES = ("acquire", "handler", "renew", "release")


def ms_to_datetime(ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(frozen=True)
class JobContext:
    """One run of one slot of one job, as its handler sees it.

    Attributes:
        key: the job's key.
        slot: the scheduled occurrence this run is for (aware UTC datetime); the same
            on every replica and on every attempt.
        attempt: 1 for the first run of the slot, 2 after a takeover, ...
        fencing_token: strictly increasing per job for every run that starts; pass it
            to the systems you write to so they can refuse a stale writer.
        idempotency_key: ``"<key>:<slot ms>"``, stable across attempts of one slot.
        cancelled: set when the lease is lost, the runner stops or the job's
            ``timeout`` passes; check it between steps of long work, or call
            [`check`][cronlock.context.JobContext.check].
        timed_out: set (with ``cancelled``) when the run went past the job's ``timeout``.
        payload: the JSON payload of a dynamic schedule, else None.
        kind: ``"scheduled"`` (its slot came) or ``"manual"`` (an operator's trigger).
        trigger_id: the trigger request's id, for a manual run; else None.
    """

    key: str
    slot_ms: int
    attempt: int
    fencing_token: int
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False)
    payload: Any = None
    timed_out: threading.Event = field(default_factory=threading.Event, compare=False)
    runner_id: str = ""
    kind: str = "scheduled"
    trigger_id: Optional[str] = None

    @property
    def slot(self) -> datetime:
        return ms_to_datetime(self.slot_ms)

    @property
    def idempotency_key(self) -> str:
        return f"{self.key}:{self.slot_ms}"

    def check(self) -> None:
        """Raise [`JobCancelled`][cronlock.errors.JobCancelled] if this run has been cancelled
        ([`JobTimeout`][cronlock.errors.JobTimeout] if because of the job's ``timeout``)."""
        if self.timed_out.is_set():
            raise JobTimeout(
                f"run of job {self.key!r} slot {self.slot.isoformat()} attempt {self.attempt} "
                "went past its timeout"
            )
        if self.cancelled.is_set():
            raise JobCancelled(
                f"run of job {self.key!r} slot {self.slot.isoformat()} attempt {self.attempt} "
                "was cancelled (lease lost or runner stopping)"
            )


@dataclass(frozen=True)
class ErrorContext:
    """Where an error passed to ``on_error(error, context)`` happened.

    ``phase`` is one of ``"acquire"`` (claiming a slot; the job did not run),
    ``"handler"`` (the handler raised), ``"renew"`` (extending the lease failed),
    ``"release"`` (recording the end of a run failed) or ``"abandoned"`` (a run ended
    without a finish: `RunAbandoned`; ``attempt`` is that run's).
    """

    key: str
    phase: str
    slot_ms: Optional[int] = None
    attempt: Optional[int] = None

    @property
    def slot(self) -> Optional[datetime]:
        return None if self.slot_ms is None else ms_to_datetime(self.slot_ms)
