"""When is the next slot: interval, cron, one-off and bounded schedules.

A *slot* is one scheduled occurrence, named by its instant in epoch milliseconds (UTC).
Every replica computes the same slots from the same schedule, which is what lets Redis
run each slot once. This module is pure arithmetic: it imports neither ``redis`` nor
``threading`` and never reads the clock (callers pass the time in).

| schedule             | slots                                                         |
|----------------------|---------------------------------------------------------------|
| ``IntervalSchedule`` | ``k * period + offset`` on the UTC epoch grid (ms precision)  |
| ``CronSchedule``     | cron matches in a timezone (DST: `cronlock.schedules._cronzone`) |
| ``OnceSchedule``     | one instant                                                   |
| ``UntilSchedule``    | another schedule's slots up to an instant (inclusive)         |

Example:
    >>> s = IntervalSchedule(30)
    >>> s.next_after(1_000), s.latest_at_or_before(61_000)
    (30000, 60000)
"""

from __future__ import annotations

from cronlock.schedules._base import Schedule
from cronlock.schedules._cron import CronSchedule
from cronlock.schedules._interval import IntervalSchedule
from cronlock.schedules._once import OnceSchedule, UntilSchedule

__all__ = [
    "CronSchedule",
    "IntervalSchedule",
    "OnceSchedule",
    "Schedule",
    "UntilSchedule",
]
