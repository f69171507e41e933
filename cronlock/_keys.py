"""The key schema, in one place.

Every key cronlock writes starts with the prefix (default ``cronlock``) and carries
the user's key in a Redis Cluster hash tag ``{...}``, so all keys one script touches
live on the same node.

============================  ===========  ===========================================
key                           type         holds / lifetime
============================  ===========  ===========================================
``P:lock:{K}``                string       the holder's token; PX = the lock's ttl
``P:lockmeta:{K}``            hash         fence, holder, since, token; PX = ttl + 60 s
``P:queue:{K}``               zset         waiting acquirers by arrival (us); PX 2x place
``P:qexp:{K}``                zset         when each waiter's place lapses (ms); same PX
``P:wake:{K}:TOKEN``          list         wakes one waiter; PX 5 s
``P:job:{K}``                 hash         a job's claim state (see docs/how-it-works)
============================  ===========  ===========================================
"""

from __future__ import annotations

from typing import NamedTuple


def tag(key: str) -> str:
    """Wrap a user key in a hash tag."""
    return "{" + key + "}"


class LockKeys(NamedTuple):
    """The keys of one lock."""

    lock: str
    meta: str
    queue: str
    queue_expiry: str
    wake_prefix: str

    @classmethod
    def of(cls, prefix: str, key: str) -> LockKeys:
        t = tag(key)
        return cls(
            lock=f"{prefix}:lock:{t}",
            meta=f"{prefix}:lockmeta:{t}",
            queue=f"{prefix}:queue:{t}",
            queue_expiry=f"{prefix}:qexp:{t}",
            wake_prefix=f"{prefix}:wake:{t}:",
        )

    def wake(self, token: str) -> str:
        """The list that wakes the waiter holding ``token`` (same hash tag as the lock)."""
        return self.wake_prefix + token


def job_key(prefix: str, key: str) -> str:
    """The hash holding one job's claim state."""
    return f"{prefix}:job:{tag(key)}"
