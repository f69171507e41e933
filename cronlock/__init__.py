"""cronlock: every replica registers the same jobs; Redis runs each occurrence once.

Public names are listed in ``__all__``; everything in a module starting with ``_`` is
private and may change without notice.
"""

from __future__ import annotations

from cronlock._version import __version__
from cronlock.clock import Clock, FakeClock, OffsetClock, SystemClock
from cronlock.errors import (
    ConfigurationError,
    CorruptStateError,
    CronlockError,
    JobCancelled,
    LockLost,
    LockNotAcquired,
)
from cronlock.exclusive import configure, exclusive
from cronlock.lock import LockInfo, RedisLock, inspect, redis_lock

__all__ = [
    "Clock",
    "ConfigurationError",
    "CorruptStateError",
    "CronlockError",
    "FakeClock",
    "JobCancelled",
    "LockInfo",
    "LockLost",
    "LockNotAcquired",
    "OffsetClock",
    "RedisLock",
    "SystemClock",
    "__version__",
    "configure",
    "exclusive",
    "inspect",
    "redis_lock",
]
