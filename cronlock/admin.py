"""``Admin``: see and steer the jobs of a fleet of runners, from any process.

The public path of `cronlock.ops.admin`, where it is defined.
"""

from __future__ import annotations

from cronlock.ops.admin import MAX_PENDING_TRIGGERS, Admin, FleetStatus, JobStatus, RunnerInfo
from cronlock.ops.schedules import ScheduleSpec

__all__ = [
    "MAX_PENDING_TRIGGERS",
    "Admin",
    "FleetStatus",
    "JobStatus",
    "RunnerInfo",
    "ScheduleSpec",
]
