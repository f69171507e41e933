"""Observers: how history sinks and metrics learn what a runner does.

A runner calls every observer it was given (``CronRunner(..., observers=[...])``) at
three moments: after each claim reply, when a handler starts, and when a run ends. The
calls happen on the scheduler and worker threads, so an observer must be quick and must
not block on I/O (buffer and write from a thread of its own). An observer that raises
is logged and otherwise ignored: observing never breaks a run.
"""

from __future__ import annotations

import logging
import traceback
import warnings
from dataclasses import dataclass
from datetime import datetime
from typing import Optional, Protocol

from cronlock.context import JobContext
from cronlock.outcomes import ClaimStatus, RunKind, RunOutcome

logger = logging.getLogger("cronlock")

TRACEBACK_LIMIT = 4000  # characters kept of a failed run's traceback


@dataclass(frozen=True)
class RunRecord:
    """One finished run, as history sinks store it.

    Attributes:
        holder: the process that ran it, `"host:pid:runner-id"` (the word history
            entries use; a claim's *owner* is its lease token, not this).
        status: a [`RunOutcome`][cronlock.outcomes.RunOutcome], a `str`:
            `"succeeded"`, `"failed"`, `"cancelled"` (the handler gave up after
            cancellation) or `"lost"` (its lease was lost: another owner has the slot).
        kind: a [`RunKind`][cronlock.outcomes.RunKind]: `"scheduled"` or `"manual"`.
        trigger_id: the trigger request's id, for a manual run; else None.
    """

    key: str
    slot: datetime
    attempt: int
    fencing_token: int
    holder: str
    runner_id: str
    status: RunOutcome
    started_at: datetime
    finished_at: datetime
    error_type: Optional[str] = None
    traceback: Optional[str] = None
    kind: RunKind = RunKind.SCHEDULED
    trigger_id: Optional[str] = None

    @property
    def duration(self) -> float:
        """Seconds from handler start to end."""
        return (self.finished_at - self.started_at).total_seconds()

    @property
    def start_delay(self) -> float:
        """Seconds from the slot boundary to the handler start."""
        return (self.started_at - self.slot).total_seconds()

    @property
    def owner(self) -> str:
        """Deprecated name of [`holder`][cronlock.observers.RunRecord] (`"host:pid:runner-id"`)."""
        warnings.warn(
            "RunRecord.owner is deprecated: use RunRecord.holder", DeprecationWarning, stacklevel=2
        )
        return self.holder


class Observer(Protocol):
    """What a runner tells an observer. Implement any subset; missing methods are skipped."""

    def claimed(self, key: str, slot_ms: int, status: ClaimStatus, runner_id: str) -> None:
        """A claim was answered: a [`ClaimStatus`][cronlock.outcomes.ClaimStatus] (a
        `str`: `won`, `taken`, `done`, `stale`, `busy`, ...)."""

    def run_started(self, ctx: JobContext, started_at: datetime) -> None:
        """A handler is about to be called."""

    def run_finished(self, record: RunRecord) -> None:
        """A run ended (whatever its outcome)."""

    def abandoned(self, key: str, slot_ms: int, reason: str, runner_id: str) -> None:
        """A run of ``key`` ended without a finish, as this runner's claim found:
        ``reason`` ``"max_attempts"`` (the slot is abandoned after its last takeover) or
        ``"lease_lapsed"`` (an older run never finished before a newer slot started)."""


def format_traceback(error: BaseException) -> str:
    """The traceback of ``error``, cut to `TRACEBACK_LIMIT` characters (its end kept)."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return text if len(text) <= TRACEBACK_LIMIT else "…" + text[-TRACEBACK_LIMIT:]


def notify(observers: tuple[object, ...], method: str, *args: object) -> None:
    """Call ``method`` on every observer that has it; log and swallow what they raise."""
    for observer in observers:
        fn = getattr(observer, method, None)
        if fn is None:
            continue
        try:
            fn(*args)
        except Exception:
            logger.exception("cronlock: observer %r failed in %s", observer, method)
