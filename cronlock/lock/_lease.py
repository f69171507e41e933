"""A lock's fixed parts: the acquire script, lease margins, queue timings, keys, holder.

Shared by the Redis lock (`cronlock.lock._redislock`) and the FIFO wait
(`cronlock.lock._wait`); nothing here calls Redis.
"""

from __future__ import annotations

import functools
import os
import socket
from typing import Any, Optional

from cronlock._keys import LockKeys
from cronlock._scripts import Script
from cronlock._validate import check_key, check_prefix, seconds_to_ms

#: Take the lock, or queue up for it (``lock_acquire.lua``); used with and without a wait.
ACQUIRE = Script("lock_acquire")

#: How long the fence key (and so the stored fencing token) outlives the lock.
FENCE_GRACE_MS = 60_000
#: A waiter's place in the queue lapses this long after its last attempt.
PLACE_MS = 2_000
#: Lifetime of a wake-up signal nobody popped.
WAKE_TTL_MS = 5_000
#: Clock drift allowed for in [`LeaseLock.remaining`][cronlock.lock.LeaseLock.remaining]: 1 % of the
#: ttl plus 2 ms.
DRIFT_FACTOR = 0.01
DRIFT_MIN = 0.002

_HOST = socket.gethostname()


def drift(ttl: float) -> float:
    return ttl * DRIFT_FACTOR + DRIFT_MIN


@functools.lru_cache(maxsize=1024)
def lock_keys(prefix: str, key: str) -> tuple[LockKeys, list[str]]:
    """The keys of a lock, and the acquire script's KEYS without the wake key (cached)."""
    keys = LockKeys.of(check_prefix(prefix), check_key(key))
    return keys, [keys.lock, keys.fence, keys.queue, keys.queue_expiry]


_holder_pid = 0
_holder = ""


def holder_name() -> str:
    """``host:pid`` of this process, for operators (recomputed after a fork)."""
    global _holder_pid, _holder
    pid = os.getpid()
    if pid != _holder_pid:
        _holder_pid, _holder = pid, f"{_HOST}:{pid}"
    return _holder


def check_wait(wait: Any) -> Optional[int]:
    if wait is None:
        return None
    return seconds_to_ms(wait, "wait", allow_zero=True)
