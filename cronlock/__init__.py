"""cronlock: every replica registers the same jobs; Redis runs each occurrence once.

Public names are listed in ``__all__``; everything in a module starting with ``_`` is
private and may change without notice.
"""

from __future__ import annotations

from cronlock._redisurl import client_from_url
from cronlock._stats import RunnerStatistics
from cronlock._version import __version__
from cronlock.admin import Admin
from cronlock.clock import Clock, FakeClock, OffsetClock, SystemClock
from cronlock.context import ErrorContext, JobContext
from cronlock.errors import (
    ConfigurationError,
    CorruptStateError,
    CronlockError,
    JobCancelled,
    JobTimeout,
    LockLost,
    LockNotAcquired,
    NotReplicated,
    RunAbandoned,
    TriggerRefused,
)
from cronlock.exclusive import configure, exclusive
from cronlock.job import Job
from cronlock.lock import LockInfo, RedisLock, inspect, redis_lock
from cronlock.marks import at, cron, interval
from cronlock.runner import CronRunner
from cronlock.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

__all__ = [
    "Admin",
    "Clock",
    "ConfigurationError",
    "CorruptStateError",
    "CronRunner",
    "CronSchedule",
    "CronlockError",
    "ErrorContext",
    "FakeClock",
    "IntervalSchedule",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobTimeout",
    "LockInfo",
    "LockLost",
    "LockNotAcquired",
    "NotReplicated",
    "OffsetClock",
    "OnceSchedule",
    "RedisLock",
    "RunAbandoned",
    "RunnerStatistics",
    "Schedule",
    "SystemClock",
    "TriggerRefused",
    "__version__",
    "at",
    "client_from_url",
    "configure",
    "cron",
    "exclusive",
    "inspect",
    "interval",
    "redis_lock",
]
