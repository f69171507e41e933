"""The key schema, in one place.

Every key cronlock writes starts with the prefix (default ``cronlock``) and carries
the user's key in a Redis Cluster hash tag ``{...}``, so all keys one script touches
live on the same node.

| key                     | type    | holds / lifetime                               |
|-------------------------|---------|------------------------------------------------|
| ``P:lock:{K}``          | string  | the holder's token; PX = the lock's ttl        |
| ``P:fence:{K}``         | string  | "fence since_us token holder"; PX = ttl + 60 s |
| ``P:queue:{K}``         | zset    | waiting acquirers by arrival (us); PX 2x place |
| ``P:qexp:{K}``          | zset    | when each waiter's place lapses (ms); same PX  |
| ``P:wake:{K}:TOKEN``    | list    | wakes one waiter; PX 5 s                       |
| ``P:slot:{K}``          | string  | ``exec --slot``: last claimed occurrence (ms)  |
| ``P:job:{K}``           | hash    | a job's claim state (see docs/how-it-works)    |
| ``P:history:{K}``       | stream  | a job's run history; capped by count and age   |
| ``P:trigger:{K}``       | list    | a job's pending manual-run requests (<= 100)   |
| ``P:triggers``          | set     | job keys with pending requests (poll fallback) |
| ``P:jobs``              | hash    | job key -> JSON (schedule, spec, last seen)    |
| ``P:pause-all``         | string  | "1" while pause-all is in effect               |
| ``P:paused``            | set     | the paused job keys (runners keep a copy)      |
| ``P:ops:version``       | string  | bumped by every pause, resume, pause-all       |
| ``P:epoch``             | string  | random; a new one means the state was lost     |
| ``P:restored:EPOCH``    | string  | who restores epoch EPOCH; EX 1 day             |
| ``P:runner:ID``         | string  | a live runner's JSON heartbeat; EX 30 s        |
| ``P:schedules``         | hash    | dynamic schedule id -> JSON spec               |
| ``P:schedules:version`` | string  | bumped on every dynamic schedule change        |
| ``P:events``            | channel | pub/sub: trigger and schedule notifications    |

The keys without a hash tag (``P:jobs``, ``P:pause-all``, ``P:runner:ID``,
``P:schedules``, ``P:triggers``, ``P:paused``, ``P:ops:version``, ``P:epoch``,
``P:restored:EPOCH``) are read and written alone, never together with a job's keys in one
script, so they may live on any Cluster node.
"""

from __future__ import annotations

from typing import NamedTuple, Optional


def tag(key: str) -> str:
    """Wrap a user key in a hash tag."""
    return "{" + key + "}"


class LockKeys(NamedTuple):
    """The keys of one lock."""

    lock: str
    fence: str
    queue: str
    queue_expiry: str
    wake_prefix: str

    @classmethod
    def of(cls, prefix: str, key: str) -> LockKeys:
        t = tag(key)
        return cls(
            lock=f"{prefix}:lock:{t}",
            fence=f"{prefix}:fence:{t}",
            queue=f"{prefix}:queue:{t}",
            queue_expiry=f"{prefix}:qexp:{t}",
            wake_prefix=f"{prefix}:wake:{t}:",
        )

    def wake(self, token: str) -> str:
        """The list that wakes the waiter holding ``token`` (same hash tag as the lock)."""
        return self.wake_prefix + token


def exec_slot_key(prefix: str, key: str) -> str:
    """``cronlock exec --slot``: the latest occurrence claimed for lock ``key`` (epoch ms)."""
    return f"{prefix}:slot:{tag(key)}"


def job_key(prefix: str, key: str) -> str:
    """The hash holding one job's claim state."""
    return f"{prefix}:job:{tag(key)}"


def history_key(prefix: str, key: str) -> str:
    """The stream holding one job's run history (same hash tag as its state)."""
    return f"{prefix}:history:{tag(key)}"


def trigger_key(prefix: str, key: str) -> str:
    """The list of one job's pending manual-run requests (same hash tag as its state)."""
    return f"{prefix}:trigger:{tag(key)}"


def pending_triggers_key(prefix: str) -> str:
    """The set of job keys with pending manual-run requests (the fallback to pub/sub)."""
    return f"{prefix}:triggers"


def job_registry_key(prefix: str) -> str:
    """The hash of every job key runners registered, with what they know of it."""
    return f"{prefix}:jobs"


def pause_all_key(prefix: str) -> str:
    """Set while pause-all is in effect: jobs first registered then start paused."""
    return f"{prefix}:pause-all"


def paused_key(prefix: str) -> str:
    """The set of paused job keys, beside each job's own ``paused`` field (for restores)."""
    return f"{prefix}:paused"


def operations_version_key(prefix: str) -> str:
    """A counter bumped by every pause, resume, pause-all and resume-all."""
    return f"{prefix}:ops:version"


def epoch_key(prefix: str) -> str:
    """A random token written when absent: a new one means the store lost its state."""
    return f"{prefix}:epoch"


def restored_key(prefix: str, epoch: str) -> str:
    """Set by the one runner that restores operators' decisions in epoch ``epoch``."""
    return f"{prefix}:restored:{epoch}"


def runner_key(prefix: str, runner_id: str) -> str:
    """One live runner's heartbeat (expires when the runner stops refreshing it)."""
    return f"{prefix}:runner:{runner_id}"


#: SCAN pattern matching the runner heartbeats of every prefix.
ANY_RUNNER_PATTERN = "*:runner:*"


def split_runner_key(redis_key: str) -> Optional[tuple[str, str]]:
    """``(prefix, runner_id)`` of a ``P:runner:ID`` key, or None if it cannot be one.

    Runner ids never contain ``:`` (see ``CronRunner.runner_id``), so the prefix is
    everything before the last ``:runner:``, whatever it contains itself.
    """
    prefix, sep, runner_id = redis_key.rpartition(":runner:")
    if not sep or not prefix or not runner_id or ":" in runner_id:
        return None
    if "{" in redis_key or "}" in redis_key:
        return None
    return prefix, runner_id


def schedules_key(prefix: str) -> str:
    """The hash of dynamic schedules, id -> JSON."""
    return f"{prefix}:schedules"


def schedules_version_key(prefix: str) -> str:
    """A counter bumped by every dynamic schedule change (replicas poll it)."""
    return f"{prefix}:schedules:version"


def events_channel(prefix: str) -> str:
    """The pub/sub channel runners listen on for triggers and schedule changes."""
    return f"{prefix}:events"
