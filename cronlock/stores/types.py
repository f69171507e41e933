"""The values that cross the store seam: requests, typed replies, history entries.

Every store answers in these types, so the runner and the operator side never see a
store's wire format. Statuses are the str-valued Enums of
[`cronlock.outcomes`][cronlock.outcomes] (`ClaimStatus.WON == "won"`), re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from cronlock._jsonable import jsonable
from cronlock.outcomes import ClaimStatus, RunKind, TriggerStatus

__all__ = [
    "ClaimReply",
    "ClaimStatus",
    "FinishInfo",
    "Heartbeat",
    "HistoryEntry",
    "JobState",
    "OperationalState",
    "Replication",
    "Retention",
    "SlotClaim",
    "SyncReply",
    "TriggerClaim",
    "TriggerReply",
    "TriggerStatus",
]


@dataclass(frozen=True)
class ClaimReply:
    """What a claim answered; fields not part of a status stay 0 / ""."""

    status: ClaimStatus
    attempt: int = 0
    fence: int = 0
    lease_until_ms: int = 0
    server_now_ms: int = 0
    detail: str = ""
    replicas: int = -1  # replicas that acknowledged the claim (WAIT); -1: not asked
    #: (slot ms, attempt) of each older run of the job that this claim recorded as ended
    #: because its lease lapsed without a finish (``expired``, ``abandoned``).
    ended: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class TriggerReply:
    """What taking a pending manual run answered."""

    status: TriggerStatus
    slot_ms: int = 0
    fence: int = 0
    lease_until_ms: int = 0
    trigger_id: str = ""


@dataclass(frozen=True)
class Replication:
    """Claims wait for this many replicas to have them, up to ``timeout_ms``."""

    replicas: int
    timeout_ms: int


@dataclass(frozen=True)
class Retention:
    """How much run history a store keeps per job: ``max_entries`` 0 keeps none,
    ``max_age_ms`` 0 has no age limit."""

    max_entries: int = 0
    max_age_ms: int = 0


NO_RETENTION = Retention()


@dataclass(frozen=True)
class SlotClaim:
    """One claim to make: which job and slot, as whom, with which lease and policies."""

    key: str
    slot_ms: int
    owner: str
    lease_ms: int
    max_attempts: int
    overlap: str
    holder: str
    retention: Retention = NO_RETENTION
    #: A re-check of a slot this runner was told runs elsewhere (``taken``, a handover):
    #: it may take a lapsed lease over, but never starts the slot afresh; when the job's
    #: state no longer names the slot (the store forgot it) the reply is ``gone``.
    recheck: bool = False
    #: Ask to be woken: on a ``taken`` reply the store notes the slot as watched, and
    #: the holder's finish announces it (a ``finished`` event), so this runner drops its
    #: re-check. Sent when the re-check at the lease's end would come before the job's
    #: next slot. A store without events may ignore it (the re-check then goes out).
    wake: bool = False


@dataclass(frozen=True)
class TriggerClaim:
    """Take one pending manual run of job ``key`` and start it if its policies allow."""

    key: str
    owner: str
    lease_ms: int
    overlap: str
    holder: str
    retention: Retention = NO_RETENTION


@dataclass(frozen=True)
class FinishInfo:
    """What the history entry of a finished run says besides its outcome."""

    attempt: int = 0
    fence: int = 0
    holder: str = ""
    duration_ms: int = 0
    error_type: str = ""
    traceback: str = ""
    kind: str = RunKind.SCHEDULED


@dataclass(frozen=True)
class Heartbeat:
    """A runner's heartbeat: its JSON description, kept for ``ttl_s`` seconds."""

    runner_id: str
    value: str
    ttl_s: int


@dataclass(frozen=True)
class SyncReply:
    """What one periodic sync read: jobs with pending triggers, the schedules' version."""

    pending_triggers: frozenset[str]
    schedules_version: Optional[str]
    #: The store's epoch: a token that changes when the store lost its state (an empty
    #: restart); "" for a store that never forgets.
    epoch: str = ""
    #: Bumped by every pause, resume, pause-all and resume-all (None: none yet, or a
    #: store that never forgets).
    operations_version: Optional[str] = None


@dataclass(frozen=True)
class OperationalState:
    """What operators decided, as a runner last read it: restored if the store forgets it.

    Attributes:
        paused: the paused job keys.
        pause_all: whether pause-all is in effect.
        schedules: every dynamic schedule, id -> JSON spec.
    """

    paused: frozenset[str] = frozenset()
    pause_all: bool = False
    schedules: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobState:
    """A job's stored claim state (field -> value, as the claim scripts name them) and
    how many manual runs wait for it."""

    fields: Mapping[str, str]
    pending_triggers: int


@dataclass(frozen=True)
class HistoryEntry:
    """One entry of a job's run history (newest first from ``Store.history``).

    Attributes:
        id: the entry id (for Redis, the stream id ``"<server ms>-<seq>"``).
        at: when the entry was written (the store's clock).
        key: the job's key.
        event: see the table in [`cronlock.history`][cronlock.history].
        kind: ``"scheduled"`` or ``"manual"`` (a triggered run).
        slot: the scheduled occurrence (for a manual run: when it started).
        attempt, fencing_token, holder: the run's (``"host:pid:runner"`` for holder).
        started, finished: for ``running`` and end entries respectively.
        duration: seconds from handler start to end (end entries).
        error_type, traceback: for ``failed`` (traceback truncated to 4000 characters).
        trigger_id, reason: for manual runs and ``skipped`` triggers.
        fields: every raw field, as strings.
    """

    id: str
    at: datetime
    key: str
    event: str
    kind: str = "scheduled"
    slot: Optional[datetime] = None
    attempt: Optional[int] = None
    fencing_token: Optional[int] = None
    holder: str = ""
    started: Optional[datetime] = None
    finished: Optional[datetime] = None
    duration: Optional[float] = None
    error_type: Optional[str] = None
    traceback: Optional[str] = None
    trigger_id: Optional[str] = None
    reason: Optional[str] = None
    fields: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields (datetimes as ISO-8601), without ``fields``."""
        return jsonable(self, exclude=frozenset({"fields"}))
