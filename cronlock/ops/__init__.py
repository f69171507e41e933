"""The operator side: see and steer a fleet of runners through its store; needs no runner.

| module      | owns                                                                    |
|-------------|-------------------------------------------------------------------------|
| `admin`     | `Admin`: job status, pause/resume, triggers, dynamic schedules, runners |
| `history`   | reading run history; the history events                                 |
| `schedules` | `ScheduleSpec`: a dynamic schedule as stored                            |
| `health`    | `Health`: a runner's health report                                      |
| `doctor`    | `check_store`: what ``cronlock doctor`` checks, on any store            |

The Redis server checks are Redis's own, so they live with the Redis store:
[`cronlock.doctor`][cronlock.doctor]; `check_store` runs them for a Redis store.
"""

from __future__ import annotations

from cronlock.ops.admin import Admin, FleetStatus, JobStatus
from cronlock.ops.health import Health, check_health
from cronlock.ops.history import HistoryEntry, read_history
from cronlock.ops.schedules import ScheduleSpec

__all__ = [
    "Admin",
    "FleetStatus",
    "Health",
    "HistoryEntry",
    "JobStatus",
    "ScheduleSpec",
    "check_health",
    "read_history",
]
