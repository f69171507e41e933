"""`IntervalSchedule`: slots every N seconds on the UTC epoch grid."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Union

from cronlock._durations import seconds_to_ms
from cronlock.errors import ConfigurationError
from cronlock.schedules._base import Schedule


class IntervalSchedule(Schedule):
    """Slots every ``seconds`` on the UTC epoch grid, shifted by ``offset``.

    Slots are ``k * period + offset`` ms for every integer ``k``, so they do not depend
    on when a process started: ``IntervalSchedule(30)`` fires at :00 and :30 of every
    minute on every replica. Periods and offsets keep millisecond precision (rounded).
    The offset is *normalised* modulo the period (``offset=-5`` with a 60 s period is
    55 s: the same grid), so equal grids compare equal.

    Args:
        seconds: the period (int, float or timedelta), at least 1 ms.
        offset: the shift of the grid from the epoch (int, float or timedelta).

    Raises:
        TypeError: a value is not a number of seconds.
        ConfigurationError: the period is not > 0, or a value is NaN or infinite.

    Example:
        >>> IntervalSchedule(60, offset=15).next_after(0)
        15000
    """

    __slots__ = ("_offset", "_period")

    def __init__(
        self, seconds: Union[int, float, timedelta], offset: Union[int, float, timedelta] = 0
    ) -> None:
        # Fast path for the common case (plain int seconds, no offset): < 1 µs.
        if type(seconds) is int and seconds > 0:
            period = seconds * 1000
        else:
            period = seconds_to_ms(seconds, "interval", signed=True)
            if period <= 0:
                raise ConfigurationError(
                    f"interval must be > 0 (at least 1 ms); got {seconds!r} seconds"
                )
        self._period = period
        self._offset = (
            0
            if offset == 0 and type(offset) is int
            else seconds_to_ms(offset, "offset", signed=True) % period
        )

    @classmethod
    def from_parts(
        cls, seconds: Any = 0, *, minutes: Any = 0, hours: Any = 0, offset: Any = 0
    ) -> IntervalSchedule:
        """The grid of ``seconds + minutes + hours`` (the ``@interval`` decorators' form).

        Raises:
            TypeError: a part is not a number of seconds.
            ConfigurationError: a part is negative or not finite, or the sum is not > 0.

        Example:
            >>> IntervalSchedule.from_parts(minutes=1, seconds=30).period_ms
            90000
        """
        parts = (("seconds", seconds, 1), ("minutes", minutes, 60), ("hours", hours, 3600))
        total_ms = 0
        for name, value, unit in parts:
            ms = seconds_to_ms(value, name, signed=True)
            if ms < 0:
                raise ConfigurationError(f"{name} must be >= 0; got {value!r}")
            total_ms += ms * unit
        if total_ms <= 0:
            raise ConfigurationError(
                f"interval must be > 0; got seconds={seconds!r}, minutes={minutes!r}, "
                f"hours={hours!r}"
            )
        return cls(timedelta(milliseconds=total_ms), offset=offset)

    @property
    def period_ms(self) -> int:
        """The period in milliseconds."""
        return self._period

    @property
    def offset_ms(self) -> int:
        """The grid offset in milliseconds, ``0 <= offset_ms < period_ms``."""
        return self._offset

    def next_after(self, after_ms: int) -> int:
        """The first grid point strictly after ``after_ms``; never None."""
        p = self._period
        return ((after_ms - self._offset) // p + 1) * p + self._offset

    def latest_at_or_before(self, at_ms: int) -> int:
        """The last grid point at or before ``at_ms``; never None."""
        p = self._period
        return ((at_ms - self._offset) // p) * p + self._offset

    def describe(self) -> str:
        """E.g. ``"every 30 s on the UTC grid"`` or ``"every 1 h on the UTC grid + 900 s"``."""
        text = f"every {_human_ms(self._period)} on the UTC grid"
        if self._offset:
            text += f" + {self._offset / 1000:g} s"
        return text

    def _key(self) -> tuple[Any, ...]:
        return (self._period, self._offset)

    def __repr__(self) -> str:
        offset = f", offset={self._offset / 1000:g}" if self._offset else ""
        return f"IntervalSchedule({self._period / 1000:g}{offset})"


def _human_ms(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms / 1000:g} s"
