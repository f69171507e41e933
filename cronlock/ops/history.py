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
| ``abandoned``  | after ``max_attempts``, or an older run kept beside a newer slot, unfinished |
| ``expired``    | the run never finished and a newer slot started (overlap ``skip``/``allow``) |
| ``replaced``   | overlap ``replace``: a newer slot cut this run short                         |
| ``skipped``    | a trigger was dropped (``reason`` ``paused``, ``busy`` or ``expired``)       |
| ``restored``   | not a run: a runner put back a pause or schedule Redis had lost (``reason``) |

Retention: ``CronRunner(history_max=1000, history_max_age=timedelta(days=7))`` caps
each stream by count (exact ``MAXLEN``) and by age (``MINID`` from the entry ids, which
are the server's clock), at every write; ``history_max=0`` writes no history. A job
that stops running keeps its last entries until the key is deleted.

A run whose replica dies leaves a ``running`` entry; the next claim of the job writes
what became of it (``taken_over``, ``abandoned`` or ``expired``). An empty Redis
(restart without persistence) forgets the history, like every other cronlock state.

Example:
    >>> from cronlock import Admin
    >>> for entry in Admin(client).history("sync-users", limit=5):  # doctest: +SKIP
    ...     print(entry.at, entry.event, entry.attempt, entry.holder)
"""

from __future__ import annotations

from typing import Any

from cronlock.errors import ConfigurationError
from cronlock.outcomes import HistoryEvent
from cronlock.stores import HistoryEntry, as_store
from cronlock.stores.redis.history import parse_entry

__all__ = ["EVENTS", "HistoryEntry", "check_limit", "parse_entry", "read_history"]

#: Every event word, in the table's order (the `HistoryEvent` values).
EVENTS = tuple(e.value for e in HistoryEvent)


def check_limit(limit: Any) -> int:
    """``limit`` when it is an int >= 1; ConfigurationError otherwise."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigurationError(f"limit must be an int >= 1; got {limit!r}")
    return limit


def read_history(store: Any, prefix: str, key: str, limit: int = 50) -> list[HistoryEntry]:
    """The latest ``limit`` history entries of job ``key``, newest first (one round trip).

    ``store`` is a [`Store`][cronlock.stores.Store] or a redis-py client.
    """
    return as_store(store, prefix).history(key, check_limit(limit))
