"""Run history kept in Redis: one capped stream per job, written by the job scripts.

Every state change of a job's runs is one entry of the stream ``P:history:{KEY}``,
appended by the claim, trigger and finish scripts themselves (no extra round trip):

| event          | meaning                                                                      |
|----------------|------------------------------------------------------------------------------|
| ``running``    | a replica won the slot (``kind`` ``scheduled``) or a trigger (``manual``)    |
| ``succeeded``  | the handler returned                                                         |
| ``failed``     | the handler raised (after its retries); ``error_type``, ``traceback``        |
| ``cancelled``  | the runner stopped while the handler ran; the lease was handed over          |
| ``taken_over`` | this attempt's lease lapsed (owner died or froze); the next attempt follows  |
| ``abandoned``  | the lease lapsed again after ``max_attempts``: the slot is marked failed     |
| ``expired``    | the run never finished and a newer slot started (overlap ``skip``/``allow``) |
| ``replaced``   | overlap ``replace``: a newer slot cut this run short                         |
| ``skipped``    | a trigger was dropped (``reason`` ``paused`` or ``busy``)                    |

Retention: ``CronRunner(history_max=1000, history_max_age=timedelta(days=7))`` caps
each stream by count (exact ``MAXLEN``) and by age (``MINID`` from the entry ids, which
are the server's clock), at every write; ``history_max=0`` writes no history. A job
that stops running keeps its last entries until the key is deleted.

Limits: a run whose replica dies leaves a ``running`` entry without an end; the next
attempt's ``taken_over`` entry (or ``expired``) says what became of it. An empty Redis
(restart without persistence) forgets the history, like every other cronlock state.

Example:
    >>> from cronlock import Admin
    >>> for entry in Admin(client).history("sync-users", limit=5):  # doctest: +SKIP
    ...     print(entry.at, entry.event, entry.attempt, entry.holder)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from cronlock._jsonable import jsonable
from cronlock._keys import history_key
from cronlock._scripts import text
from cronlock.context import ms_to_datetime
from cronlock.errors import ConfigurationError
from cronlock.outcomes import HistoryEvent

__all__ = ["EVENTS", "HistoryEntry", "read_history"]

#: Every event word, in the table's order (the `HistoryEvent` values).
EVENTS = tuple(e.value for e in HistoryEvent)


@dataclass(frozen=True)
class HistoryEntry:
    """One entry of a job's run history.

    [`read_history`][cronlock.history.read_history] returns them newest first.

    Attributes:
        id: the stream entry id (``"<server ms>-<seq>"``).
        at: when the entry was written (server clock).
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


def _int(value: Optional[str]) -> Optional[int]:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _when(value: Optional[str]) -> Optional[datetime]:
    ms = _int(value)
    return None if ms is None else ms_to_datetime(ms)


def parse_entry(key: str, entry_id: Any, raw: Mapping[Any, Any]) -> HistoryEntry:
    """A stream entry (as redis-py returns it, bytes or str) as a
    [`HistoryEntry`][cronlock.history.HistoryEntry]."""
    f = {text(k): text(v) for k, v in raw.items()}
    eid = text(entry_id)
    duration_ms = _int(f.get("duration_ms"))
    return HistoryEntry(
        id=eid,
        at=ms_to_datetime(int(eid.split("-")[0])),
        key=key,
        event=f.get("event", ""),
        kind=f.get("kind") or "scheduled",
        slot=_when(f.get("slot")),
        attempt=_int(f.get("attempt")),
        fencing_token=_int(f.get("fence")),
        holder=f.get("holder", ""),
        started=_when(f.get("started")),
        finished=_when(f.get("finished")),
        duration=None if duration_ms is None else duration_ms / 1000,
        error_type=f.get("error_type") or None,
        traceback=f.get("traceback") or None,
        trigger_id=f.get("trigger") or None,
        reason=f.get("reason") or None,
        fields=f,
    )


def read_history(client: Any, prefix: str, key: str, limit: int = 50) -> list[HistoryEntry]:
    """The latest ``limit`` history entries of job ``key``, newest first (one XREVRANGE)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigurationError(f"limit must be an int >= 1; got {limit!r}")
    rows = client.xrevrange(history_key(prefix, key), count=limit)
    return [parse_entry(key, entry_id, raw) for entry_id, raw in rows]
