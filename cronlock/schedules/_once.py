"""`OnceSchedule` (one instant) and `UntilSchedule` (another schedule, bounded)."""

from __future__ import annotations

from typing import Any, Optional

from cronlock.schedules._base import Instant, Schedule, instant_ms, iso


class OnceSchedule(Schedule):
    """A single slot at ``at`` (a one-off that runs once cluster-wide).

    Args:
        at: an aware datetime, an ISO-8601 string with an offset (``"...Z"`` accepted),
            or epoch seconds. Naive values are refused, not guessed.

    Example:
        >>> OnceSchedule("2030-01-01T00:00:00Z").next_after(0)
        1893456000000
    """

    __slots__ = ("_at",)

    def __init__(self, at: Instant) -> None:
        self._at = instant_ms(at, "at")

    @property
    def at_ms(self) -> int:
        """The one slot, epoch ms."""
        return self._at

    @property
    def period_ms(self) -> None:
        """None: a one-off has no period."""
        return None

    def next_after(self, after_ms: int) -> Optional[int]:
        """The slot if it is strictly after ``after_ms``, else None."""
        return self._at if self._at > after_ms else None

    def latest_at_or_before(self, at_ms: int) -> Optional[int]:
        """The slot if it is at or before ``at_ms``, else None."""
        return self._at if self._at <= at_ms else None

    def describe(self) -> str:
        """E.g. ``"once at 2030-01-01T00:00:00+00:00"``."""
        return f"once at {iso(self._at)}"

    def _key(self) -> tuple[Any, ...]:
        return (self._at,)

    def __repr__(self) -> str:
        return f"OnceSchedule({iso(self._at)!r})"


class UntilSchedule(Schedule):
    """Another schedule's slots, none after ``until`` (a slot exactly at it still runs).

    Args:
        schedule: the schedule to bound.
        until: an aware datetime, an ISO-8601 string with an offset, or epoch seconds.

    Example:
        >>> s = UntilSchedule(IntervalSchedule(60), "1970-01-01T00:02:00Z")
        >>> s.next_after(60_000), s.next_after(120_000)
        (120000, None)
    """

    __slots__ = ("_schedule", "_until")

    def __init__(self, schedule: Schedule, until: Instant) -> None:
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be a Schedule; got {schedule!r}")
        self._schedule = schedule
        self._until = instant_ms(until, "until")

    @property
    def schedule(self) -> Schedule:
        """The bounded schedule."""
        return self._schedule

    @property
    def until_ms(self) -> int:
        """The last instant a slot may have, epoch ms."""
        return self._until

    @property
    def period_ms(self) -> Optional[int]:
        """The wrapped schedule's period."""
        return self._schedule.period_ms

    def next_after(self, after_ms: int) -> Optional[int]:
        """The wrapped schedule's next slot, or None once it would be after ``until``."""
        nxt = self._schedule.next_after(after_ms)
        return nxt if nxt is not None and nxt <= self._until else None

    def latest_at_or_before(self, at_ms: int) -> Optional[int]:
        """The wrapped schedule's latest slot at or before ``min(at_ms, until)``."""
        return self._schedule.latest_at_or_before(min(at_ms, self._until))

    def describe(self) -> str:
        """E.g. ``"every 1 min on the UTC grid, until 2030-01-01T00:00:00+00:00"``."""
        return f"{self._schedule.describe()}, until {iso(self._until)}"

    def _key(self) -> tuple[Any, ...]:
        return (self._schedule, self._until)

    def __repr__(self) -> str:
        return f"UntilSchedule({self._schedule!r}, {iso(self._until)!r})"
