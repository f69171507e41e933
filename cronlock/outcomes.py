"""One name per fact: the statuses and outcomes of claims and runs, and the words stored for them.

Every member is a `str` (a `str`-valued `Enum`), so it compares equal to its word
(`RunOutcome.SUCCEEDED == "succeeded"`), prints as its word and is written unchanged to
JSON, Redis, PostgreSQL and Prometheus labels. Code that compared plain strings keeps
working.

The words a run's end leaves behind differ by medium, for historical reasons that are
now stored data (Lua scripts, existing streams and tables): the finish script is told
`"done"` where the history stream says `"succeeded"`, and `"handover"` where it says
`"cancelled"`. [`RUN_OUTCOMES`][cronlock.outcomes.RUN_OUTCOMES] is the one table of
those words; nothing else spells them.

| outcome | finish script | job state after it | history event | record |
|---|---|---|---|---|
| `SUCCEEDED` | `done` | `done` | `succeeded` | `succeeded` |
| `FAILED` | `failed` | `failed` | `failed` | `failed` |
| `CANCELLED` | `handover` (runner stopping) | `running`, lease ended | `cancelled` | `cancelled` |
| `LOST` | not sent | the successor's | none | `lost` |

"Finish script" is `job_finish.lua`'s outcome argument; "record" is the word of
`RunRecord.status`, the PostgreSQL `status` column, the metrics `outcome` label and the
API. A lost run sends no finish: a successor owns the slot.

The other words (claim replies, trigger replies, job state, history events) are the same
in every medium: each Enum's values are the stored words.

Two names that are not one fact: a claim's `owner` is the random token that holds a
lease (`job_claim.lua` ARGV[2]); a run's `holder` is `"host:pid:runner-id"`, the process
that ran it (history entries, [`RunRecord.holder`][cronlock.observers.RunRecord]).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Optional

__all__ = [
    "RUN_OUTCOMES",
    "ClaimStatus",
    "HistoryEvent",
    "OutcomeWords",
    "RunKind",
    "RunOutcome",
    "SlotStatus",
    "TriggerStatus",
    "outcome_of_event",
    "outcome_of_finish",
]


class _Word(str, Enum):
    """A str-valued Enum that prints as its word (`str()`, f-strings, `%s`)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class ClaimStatus(_Word):
    """What a claim of one slot answered (`job_claim.lua`), as observers and metrics see it."""

    WON = "won"  # this replica runs the slot
    TAKEN = "taken"  # another replica holds a live lease on the same slot
    DONE = "done"  # the slot already finished (done or failed)
    STALE = "stale"  # a newer slot was claimed: this one is never run
    BUSY = "busy"  # overlap "skip": the previous run still holds a live lease
    EXHAUSTED = "exhausted"  # max_attempts takeovers: the slot is marked failed
    PAUSED = "paused"  # the job is paused
    CORRUPT = "corrupt"  # the job's state key holds data cronlock did not write
    UNREPLICATED = "unreplicated"  # won, but fewer replicas than wait_replicas had it: handed back
    GONE = "gone"  # a re-check found the job's state forgotten (empty restart): not started


class TriggerStatus(_Word):
    """What taking a manual run (trigger) answered (`job_trigger.lua`)."""

    NONE = "none"  # no trigger is waiting
    WON = "won"  # this replica runs it
    PAUSED = "paused"  # dropped: the job is paused
    BUSY = "busy"  # dropped: a run holds a live lease (overlap "skip")
    EXPIRED = "expired"  # dropped: taken after the request's expiry
    CORRUPT = "corrupt"  # the job's state key holds data cronlock did not write


class SlotStatus(_Word):
    """The `status` field of a job's state hash: where its latest claimed slot stands."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class RunOutcome(_Word):
    """How one run ended: `RunRecord.status`, the PostgreSQL `status` column, the metrics
    `outcome` label. See the module's table for the words other media store."""

    SUCCEEDED = "succeeded"  # the handler returned
    FAILED = "failed"  # the handler raised (after its retries) or ran past its timeout
    CANCELLED = "cancelled"  # the handler gave up after cancellation (runner stopping)
    LOST = "lost"  # the lease was lost: another owner has the slot


class HistoryEvent(_Word):
    """The `event` field of a run history entry (`P:history:{KEY}`), see `cronlock.history`."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TAKEN_OVER = "taken_over"
    ABANDONED = "abandoned"
    EXPIRED = "expired"
    REPLACED = "replaced"
    SKIPPED = "skipped"
    RESTORED = "restored"  # not a run: a runner put back a pause or a schedule Redis forgot

    @property
    def ends_run(self) -> bool:
        """True for the events that end a run (every one but `running`, `skipped` and
        `restored`)."""
        return self not in (HistoryEvent.RUNNING, HistoryEvent.SKIPPED, HistoryEvent.RESTORED)


class RunKind(_Word):
    """Why a run happened: its slot came (`scheduled`) or an operator triggered it (`manual`)."""

    SCHEDULED = "scheduled"
    MANUAL = "manual"


@dataclass(frozen=True)
class OutcomeWords:
    """The words one [`RunOutcome`][cronlock.outcomes.RunOutcome] leaves in each medium.

    Attributes:
        finish: the finish script's outcome argument; None when no finish is sent.
        slot: the job state's `status` once the finish is recorded; None: left as it is.
        history: the history event the finish script appends; None: no entry.
        counter: the `RunnerStatistics` field it counts; None: counted by what the
            handler did (a lost run).
    """

    finish: Optional[str]
    slot: Optional[SlotStatus]
    history: Optional[HistoryEvent]
    counter: Optional[str]


RUN_OUTCOMES: Mapping[RunOutcome, OutcomeWords] = MappingProxyType(
    {
        RunOutcome.SUCCEEDED: OutcomeWords(
            "done", SlotStatus.DONE, HistoryEvent.SUCCEEDED, "runs_succeeded"
        ),
        RunOutcome.FAILED: OutcomeWords(
            "failed", SlotStatus.FAILED, HistoryEvent.FAILED, "runs_failed"
        ),
        RunOutcome.CANCELLED: OutcomeWords(
            "handover", None, HistoryEvent.CANCELLED, "runs_cancelled"
        ),
        RunOutcome.LOST: OutcomeWords(None, None, None, None),
    }
)
"""The one table of the words each run outcome is stored under (see the module docstring)."""

_BY_FINISH = {w.finish: o for o, w in RUN_OUTCOMES.items() if w.finish is not None}
_BY_EVENT = {w.history: o for o, w in RUN_OUTCOMES.items() if w.history is not None}


def outcome_of_finish(word: str) -> RunOutcome:
    """The outcome a finish-script word stands for (`"done"` is `SUCCEEDED`); ValueError if none."""
    try:
        return _BY_FINISH[word]
    except KeyError:
        raise ValueError(f"not a finish outcome: {word!r}") from None


def outcome_of_event(event: str) -> Optional[RunOutcome]:
    """The outcome a history event records (`"succeeded"` is `SUCCEEDED`); None for the
    events that are not the end of a run by its owner (`running`, `taken_over`, ...)."""
    try:
        return _BY_EVENT[HistoryEvent(event)]
    except (KeyError, ValueError):
        return None
