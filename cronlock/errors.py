"""Every exception cronlock raises, in one tree.

```text
CronlockError
├── ConfigurationError (also ValueError)   bad input, refused before Redis is touched
├── LockNotAcquired                        someone else holds the lock (or the wait ran out)
├── LockLost                               a held lock expired or was taken by someone else
├── JobCancelled                           raised by ctx.check() once a run is cancelled
│   └── JobTimeout                         ... because it ran past its job's timeout
├── CorruptStateError                      a cronlock key holds data that is not ours
├── NotReplicated                          a claim reached fewer replicas than asked for
│   └── FinishNotReplicated                ... a finish did (it was recorded all the same)
├── RunAbandoned                           a run ended without a finish (given to on_error)
└── TriggerRefused                         a trigger of a paused job, without force
```

Errors from Redis itself (``redis.ConnectionError``, ``redis.TimeoutError``, ...) are
not wrapped: the caller already knows them, and wrapping would hide the cause.
"""

from __future__ import annotations


class CronlockError(Exception):
    """Root of every exception raised by cronlock."""


class ConfigurationError(CronlockError, ValueError):
    """A value given to cronlock is not acceptable; the message names it."""


class LockNotAcquired(CronlockError):
    """The lock is held by someone else, and waiting (if any) did not get it."""

    def __init__(self, key: str, message: str | None = None) -> None:
        self.key = key
        super().__init__(message or f"lock {key!r} is held by another owner")


class LockLost(CronlockError):
    """A lock this process held is no longer ours: it expired or another owner took it."""

    def __init__(self, key: str, message: str | None = None) -> None:
        self.key = key
        super().__init__(message or f"lock {key!r} was lost (expired or taken by another owner)")


class JobCancelled(CronlockError):
    """The run was cancelled: its lease was lost or the runner is stopping."""


class JobTimeout(JobCancelled):
    """The run went on past its job's ``timeout``.

    ``ctx.check()`` raises it once the timeout has passed, and a timed-out run is recorded
    as failed with this error, however its handler ended.
    """


class CorruptStateError(CronlockError):
    """A cronlock key in Redis holds data cronlock did not write (wrong type or fields)."""


class NotReplicated(CronlockError):
    """A won claim was acknowledged by fewer replicas than ``wait_replicas`` in time.

    The run does not start (a failover could lose the claim and let a second replica
    run the slot); the slot is handed back so that a replica whose claim does reach the
    replicas can run it.
    """


class FinishNotReplicated(NotReplicated):
    """A finish was recorded, but fewer replicas than ``wait_replicas`` acknowledged it in time.

    Raised by a store's ``finish(..., replication=...)`` *after* the master accepted the
    finish (so it is not to be sent again): a failover before the replicas have it could
    lose it, and another runner would run the slot again. The runner logs a WARNING and
    counts it (``finishes_unreplicated``); the run is over either way.
    """

    def __init__(self, key: str, slot_ms: int, replicas: int, wanted: int) -> None:
        self.key = key
        self.slot_ms = slot_ms
        self.replicas = replicas
        self.wanted = wanted
        super().__init__(
            f"the finish of job {key!r} slot {slot_ms} reached {replicas} of the {wanted} "
            "replicas asked for (wait_replicas)"
        )


class RunAbandoned(CronlockError):
    """A run of a job ended without a finish: its lease lapsed and nobody takes it over.

    Never raised: it is what ``on_error`` receives (phase ``"abandoned"``) when a slot is
    abandoned after ``max_attempts`` takeovers, or when a newer slot's claim records an
    older run as ended (overlap ``"allow"``, a triggered run, or the latest run
    ``expired``). The owner died or froze; the history says which attempt it was.
    """


class TriggerRefused(CronlockError):
    """A manual run was refused before it was queued (the job is paused; pass ``force``)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)
