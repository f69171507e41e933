"""When is the next slot: interval, cron, one-off and bounded schedules.

A *slot* is one scheduled occurrence, named by its instant in epoch milliseconds (UTC).
Every replica computes the same slots from the same schedule, which is what lets Redis
run each slot once. This module is pure arithmetic: it imports neither ``redis`` nor
``threading`` and never reads the clock (callers pass the time in).

| schedule             | slots                                                        |
|----------------------|--------------------------------------------------------------|
| ``IntervalSchedule`` | ``k * period + offset`` on the UTC epoch grid (ms precision) |
| ``CronSchedule``     | cron matches in a timezone; DST rules in `cronlock._cron`    |
| ``OnceSchedule``     | one instant                                                  |
| ``UntilSchedule``    | another schedule's slots up to an instant (inclusive)        |

Example:
    >>> s = IntervalSchedule(30)
    >>> s.next_after(1_000), s.latest_at_or_before(61_000)
    (30000, 60000)
"""

from __future__ import annotations

import abc
import math
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, Optional, Union

from cronlock import _cron
from cronlock._durations import seconds_to_ms
from cronlock.errors import ConfigurationError

__all__ = [
    "CronSchedule",
    "IntervalSchedule",
    "OnceSchedule",
    "Schedule",
    "UntilSchedule",
]

Instant = Union[datetime, str, int, float]
_UTC = timezone.utc


class Schedule(abc.ABC):
    """The slots of a job: a pure function of time, identical on every replica.

    Subclasses are immutable, hashable and compare by value, so two replicas (or a
    replica and its configuration) can check they mean the same schedule.
    """

    __slots__ = ()

    @abc.abstractmethod
    def next_after(self, after_ms: int) -> Optional[int]:
        """The first slot strictly after ``after_ms`` (epoch ms, UTC); None when none is left."""

    @abc.abstractmethod
    def latest_at_or_before(self, at_ms: int) -> Optional[int]:
        """The most recent slot at or before ``at_ms`` (for catch-up); None when there is none."""

    @property
    @abc.abstractmethod
    def period_ms(self) -> Optional[int]:
        """Typical spacing of slots in ms (the smallest seen for cron); None for a one-off."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Human text, e.g. ``"cron '*/5 * * * *' in Europe/Athens"``."""

    @abc.abstractmethod
    def _key(self) -> tuple[Any, ...]:
        """What equality and hashing compare."""

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Schedule)
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))


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


class CronSchedule(Schedule):
    """Slots of a cron expression in a timezone, returned as UTC epoch ms.

    Expressions have 5 fields (``minute hour day-of-month month day-of-week``) or 6,
    where the sixth is **seconds, placed LAST** as croniter expects
    (``"0 12 * * * 30"`` is 12:00:30 daily; cronsim and Quartz put seconds first).
    Aliases ``@hourly @daily @midnight @weekly @monthly @yearly @annually`` always keep
    their fixed meaning. ``H`` (hashed) fields need ``hash_id`` (the runner passes the
    job key), so jobs spread over the hour but replicas agree; ``R`` (random) is refused.
    ``L``, ``W``, ``#`` and ``?`` follow croniter. When both day fields are restricted
    they are OR-ed, unless one starts with ``*`` (AND), as in Debian cron.

    DST (details and table in `cronlock._cron`): a fixed-time job whose wall time
    falls into a spring-forward gap runs once at the end of the gap; in an autumn fold
    it runs once at the first occurrence (``dst_fold="once"``) or at both
    (``dst_fold="both"``). Jobs with ``*`` in the minute or hour field follow real time
    (every real interval through a fold; non-existent wall times skipped).

    Construction parses each (expression, hash id) once (an LRU cache), and validates
    eagerly; slots are whole seconds.

    Args:
        expression: the cron expression or alias.
        timezone: a zone name (``"Europe/Athens"``) or a PEP 495 tzinfo; pytz is refused.
        dst_fold: ``"once"`` (default) or ``"both"``.
        hash_id: the seed for ``H`` fields; ignored (and not compared) when unused.

    Raises:
        TypeError: an argument has the wrong type.
        ConfigurationError: invalid expression, unknown timezone, bad ``dst_fold``.

    Example:
        >>> s = CronSchedule("30 2 * * *", "America/New_York")
        >>> s.describe()
        "cron '30 2 * * *' in America/New_York"
    """

    __slots__ = ("_both", "_expression", "_hash_id", "_spec", "_zone")

    def __init__(
        self,
        expression: str,
        timezone: Union[str, tzinfo] = "UTC",
        dst_fold: str = "once",
        hash_id: Optional[str] = None,
    ) -> None:
        if not isinstance(expression, str):
            raise TypeError(f"cron expression must be a str; got {expression!r}")
        if dst_fold not in ("once", "both"):
            raise ConfigurationError(f"dst_fold must be 'once' or 'both'; got {dst_fold!r}")
        if hash_id is not None and not isinstance(hash_id, str):
            raise TypeError(f"hash_id must be a str or None; got {hash_id!r}")
        tz = _cron.check_tz(timezone)
        normalised = _cron.normalise(expression)
        if not normalised:
            raise ConfigurationError(f"cron expression must not be empty; got {expression!r}")
        spec = _cron.parse(normalised, hash_id if "h" in normalised.lower() else None)
        self._expression = " ".join(expression.split())
        self._spec = spec
        self._zone = _cron.Zone(tz)
        self._both = dst_fold == "both"
        self._hash_id = hash_id if spec.uses_hash else None

    @property
    def expression(self) -> str:
        """The expression as given (whitespace collapsed)."""
        return self._expression

    @property
    def timezone(self) -> tzinfo:
        """The timezone slots are computed in."""
        return self._zone.tz

    @property
    def dst_fold(self) -> str:
        """``"once"`` or ``"both"``."""
        return "both" if self._both else "once"

    @property
    def period_ms(self) -> int:
        """The smallest gap between consecutive matches over a sample (wall-clock)."""
        return self._spec.period_s * 1000

    def next_after(self, after_ms: int) -> Optional[int]:
        """The first slot strictly after ``after_ms``; None if the expression stops matching."""
        s = _cron.next_after(self._spec, self._zone, self._both, after_ms // 1000)
        return None if s is None else s * 1000

    def latest_at_or_before(self, at_ms: int) -> Optional[int]:
        """The last slot at or before ``at_ms``; None if there is none (within 50 years)."""
        s = _cron.latest_at_or_before(self._spec, self._zone, self._both, at_ms // 1000)
        return None if s is None else s * 1000

    def describe(self) -> str:
        """E.g. ``"cron '*/5 * * * *' in Europe/Athens"``."""
        text = f"cron {self._expression!r} in {_cron.zone_key(self._zone.tz)}"
        if self._both:
            text += " (DST fold: both)"
        if self._hash_id is not None:
            text += f" (hash id {self._hash_id!r})"
        return text

    def _key(self) -> tuple[Any, ...]:
        return (
            " ".join(self._spec.fields),
            _cron.zone_key(self._zone.tz),
            self._both,
            self._hash_id,
        )

    def __repr__(self) -> str:
        extra = ", dst_fold='both'" if self._both else ""
        if self._hash_id is not None:
            extra += f", hash_id={self._hash_id!r}"
        return f"CronSchedule({self._expression!r}, {_cron.zone_key(self._zone.tz)!r}{extra})"


def instant_ms(value: Any, name: str) -> int:
    """An aware datetime, ISO-8601 string with offset, or epoch seconds, as epoch ms.

    Naive datetimes (and ISO strings without an offset) are refused: replicas in
    different local zones would read them differently.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):  # Python 3.9/3.10 fromisoformat lacks "Z"
            text = text[:-1] + "+00:00"
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise ConfigurationError(f"{name} {value!r} is not an ISO-8601 date-time") from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ConfigurationError(
                f"{name} {value!r} is naive: give a timezone (e.g. tzinfo=timezone.utc or "
                "'+00:00'), since replicas may not share a local zone"
            )
        return _aware_ms(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{name} must be an aware datetime, an ISO-8601 string or epoch seconds; got {value!r}"
        )
    if not math.isfinite(value):
        raise ConfigurationError(f"{name} must be finite epoch seconds; got {value!r}")
    return round(value * 1000)


def _aware_ms(value: datetime) -> int:
    offset = value.utcoffset()
    assert offset is not None
    naive = value.replace(tzinfo=None) - offset
    delta = naive - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


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
        return f"once at {_iso(self._at)}"

    def _key(self) -> tuple[Any, ...]:
        return (self._at,)

    def __repr__(self) -> str:
        return f"OnceSchedule({_iso(self._at)!r})"


def _iso(ms: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=_UTC) + timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")


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
        return f"{self._schedule.describe()}, until {_iso(self._until)}"

    def _key(self) -> tuple[Any, ...]:
        return (self._schedule, self._until)

    def __repr__(self) -> str:
        return f"UntilSchedule({self._schedule!r}, {_iso(self._until)!r})"
