"""The ``schedule`` library's ``every(...)`` DSL, translated into shared slots.

``runner.every(10).minutes.do(fn)`` reads like `schedule`, but the job runs on
slots every replica computes alike: intervals sit on the UTC epoch grid (not relative to
when the process started) and day/weekday jobs become cron in a timezone.

Translation (``n`` is the argument of ``every``; ``tz`` the ``.at(..., tz)`` zone,
default UTC; ``at()`` times without a zone are **UTC**, where ``schedule`` would use
the process's local zone, because replicas must agree and never read their local zone):

| DSL | schedule |
|---|---|
| ``every(n).seconds`` | ``IntervalSchedule(n)`` |
| ``every(n).minutes`` | ``IntervalSchedule(60 n)`` |
| ``every(n).minutes.at(":SS")`` | ``IntervalSchedule(60 n, offset=SS)`` |
| ``every(n).hours`` | ``IntervalSchedule(3600 n)`` |
| ``every(n).hours.at("MM:SS")``, ``.at(":MM")`` | ``IntervalSchedule(3600 n, offset=MM*60+SS)`` |
| ``every().hour.at(":MM", tz)`` | ``CronSchedule("MM * * * *", tz)`` (6 fields if SS) |
| ``every(n).hours.at(.., tz)``, 24 % n = 0 | ``CronSchedule("MM */n * * *", tz)`` |
| ``every().day`` | ``IntervalSchedule(86400)`` (00:00 UTC) |
| ``every().day.at("HH:MM[:SS]", tz)`` | ``CronSchedule("MM HH * * *", tz)`` (+ SS last) |
| ``every(n).days`` | ``IntervalSchedule(86400 n)``: every n-th day counted from 1970-01-01 UTC |
| ``every(n).days.at("HH:MM[:SS]")`` | ``IntervalSchedule(86400 n, offset=HH:MM:SS)``, UTC only |
| ``every(n).weeks`` | ``IntervalSchedule(604800 n, offset=4 days)``: Mondays 00:00 UTC |
| ``every().monday[.at("HH:MM", tz)]`` | ``CronSchedule("MM HH * * 1", tz)`` (00:00 default) |
| ``... .until(moment)`` | ``UntilSchedule(schedule, moment)`` |
| ``... .to(m)`` | refused: a random interval cannot be shared |
| ``... .tag(*tags)`` | tags passed to the runner |

``every(n).days.at()`` refuses another timezone than UTC. Weeks start on Monday 00:00 UTC
(1970-01-01 was a Thursday, hence the offset of 4 days).

``.until()`` accepts what ``schedule`` accepts: an aware datetime, a naive one or a
string ``"%Y-%m-%d %H:%M[:%S]"``, ``"%Y-%m-%d"``, ``"%H:%M[:%S]"`` (naive values are
read in the ``.at()`` zone, default UTC), a ``time`` (today, in that zone) or a
``timedelta`` (from the clock's now, so replicas may differ by their clock skew near the
bound). A moment in the past is refused, as in ``schedule``.

Errors carry ``schedule``'s meaning and are
[`ConfigurationError`][cronlock.errors.ConfigurationError] (``every(2).monday``,
``every(2).minute``, ``.at()`` on seconds or weeks, bad formats).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Hashable
from datetime import datetime, timedelta, timezone, tzinfo
from datetime import time as dtime
from typing import Any, Callable, Optional, Union

from cronlock.errors import ConfigurationError
from cronlock.schedules import _cronzone
from cronlock.schedules._base import Schedule
from cronlock.schedules._cron import CronSchedule
from cronlock.schedules._interval import IntervalSchedule
from cronlock.schedules._once import UntilSchedule

Register = Callable[
    [Schedule, Callable[..., Any], tuple[Any, ...], dict[str, Any], frozenset[Any]], Any
]

_UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 604800}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_UNTIL_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%H:%M:%S", "%H:%M")
_MONDAY_OFFSET = 4 * 86400  # 1970-01-01 was a Thursday


class Every:
    """One ``every(...)`` chain; ``.do(fn)`` hands the translated schedule to ``register``.

    Args:
        interval: ``n`` in ``every(n)``: a positive int (or float for sub-unit periods).
        register: ``register(schedule, fn, args, kwargs, tags)``; ``.do()`` returns
            its result (the runner's job handle).
        clock: epoch seconds now (the runner passes its clock); only used by
            ``.until(timedelta | time | "HH:MM")`` and the "until in the past" check.

    Example:
        >>> Every(10, lambda s, *rest: s).minutes.do(print)
        IntervalSchedule(600)
    """

    def __init__(
        self,
        interval: Union[int, float] = 1,
        register: Optional[Register] = None,
        *,
        clock: Optional[Callable[[], float]] = None,
    ) -> None:
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise TypeError(f"every() takes a number of units; got {interval!r}")
        if not math.isfinite(interval) or interval <= 0:
            raise ConfigurationError(f"every() needs an interval > 0; got {interval!r}")
        self.interval = interval
        self._register = register
        self._clock = clock or time.time
        self.unit: Optional[str] = None
        self.start_day: Optional[str] = None
        self.at_time: Optional[dtime] = None
        self.at_tz: Optional[tzinfo] = None
        self._until: Any = None
        self.tags: set[Hashable] = set()

    def __repr__(self) -> str:
        return f"<Every {self.interval} {self.unit or '?'}>"

    # Units -------------------------------------------------------------------

    def _set_unit(self, unit: str, singular: bool) -> Every:
        if singular and self.interval != 1:
            raise ConfigurationError(f"Use {unit} instead of {unit[:-1]}")
        self.unit = unit
        return self

    second = property(lambda self: self._set_unit("seconds", True))
    seconds = property(lambda self: self._set_unit("seconds", False))
    minute = property(lambda self: self._set_unit("minutes", True))
    minutes = property(lambda self: self._set_unit("minutes", False))
    hour = property(lambda self: self._set_unit("hours", True))
    hours = property(lambda self: self._set_unit("hours", False))
    day = property(lambda self: self._set_unit("days", True))
    days = property(lambda self: self._set_unit("days", False))
    week = property(lambda self: self._set_unit("weeks", True))
    weeks = property(lambda self: self._set_unit("weeks", False))

    def _set_day(self, day: str) -> Every:
        if self.interval != 1:
            raise ConfigurationError(
                f"Scheduling .{day}() jobs is only allowed for weekly jobs. Using .{day}() "
                "on a job scheduled to run every 2 or more weeks is not supported."
            )
        self.start_day = day
        self.unit = "weeks"
        return self

    monday = property(lambda self: self._set_day("monday"))
    tuesday = property(lambda self: self._set_day("tuesday"))
    wednesday = property(lambda self: self._set_day("wednesday"))
    thursday = property(lambda self: self._set_day("thursday"))
    friday = property(lambda self: self._set_day("friday"))
    saturday = property(lambda self: self._set_day("saturday"))
    sunday = property(lambda self: self._set_day("sunday"))

    # Modifiers ---------------------------------------------------------------

    def tag(self, *tags: Hashable) -> Every:
        """Attach tags (hashable values) passed on to the runner."""
        if not all(isinstance(t, Hashable) for t in tags):
            raise TypeError("Tags must be hashable")
        self.tags.update(tags)
        return self

    def at(self, time_str: str, tz: Union[str, tzinfo, None] = None) -> Every:
        """Run at a time within the unit: ``"HH:MM[:SS]"`` (days, weekdays),
        ``"MM:SS"`` or ``":MM"`` (hours), ``":SS"`` (minutes); ``tz`` default UTC."""
        if self.unit not in ("days", "hours", "minutes") and not self.start_day:
            raise ConfigurationError(
                "Invalid unit (valid units are `days`, `hours`, and `minutes`)"
            )
        if tz is not None:
            self.at_tz = _cronzone.check_tz(tz)
        if not isinstance(time_str, str):
            raise TypeError("at() should be passed a string")
        hour = minute = second = 0
        if self.unit == "days" or self.start_day:
            if not re.match(r"^[0-2]\d:[0-5]\d(:[0-5]\d)?$", time_str):
                raise ConfigurationError(
                    f"Invalid time format for a daily job (valid format is HH:MM(:SS)?); "
                    f"got {time_str!r}"
                )
            parts = [int(p) for p in time_str.split(":")]
            hour, minute = parts[0], parts[1]
            second = parts[2] if len(parts) == 3 else 0
            if hour > 23:
                raise ConfigurationError(
                    f"Invalid number of hours ({hour} is not between 0 and 23)"
                )
        elif self.unit == "hours":
            if not re.match(r"^([0-5]\d)?:[0-5]\d$", time_str):
                raise ConfigurationError(
                    f"Invalid time format for an hourly job (valid format is (MM)?:SS); "
                    f"got {time_str!r}"
                )
            head, tail = time_str.split(":")
            minute, second = (int(head), int(tail)) if head else (int(tail), 0)
        else:
            if not re.match(r"^:[0-5]\d$", time_str):
                raise ConfigurationError(
                    f"Invalid time format for a minutely job (valid format is :SS); "
                    f"got {time_str!r}"
                )
            second = int(time_str[1:])
        self.at_time = dtime(hour, minute, second)
        return self

    def to(self, latest: int) -> Every:
        """Refused: a random interval per process cannot give replicas a shared slot."""
        raise ConfigurationError(
            f"every({self.interval}).to({latest!r}) picks a random interval in each "
            "process, so replicas could not agree on slots; use a fixed interval, or "
            "runner.cron('H ...') to spread jobs deterministically"
        )

    def until(self, until_time: Union[datetime, timedelta, dtime, str]) -> Every:
        """No slots after ``until_time`` (see the module docstring for the forms)."""
        if not isinstance(until_time, (datetime, timedelta, dtime, str)):
            raise TypeError(
                "until() takes a string, datetime.datetime, datetime.timedelta, "
                "datetime.time parameter"
            )
        self._until = until_time
        return self

    # Translation -------------------------------------------------------------

    def to_schedule(self) -> Schedule:
        """The shared schedule this chain means (see the table in the module docstring)."""
        if self.unit is None:
            raise ConfigurationError(
                "Invalid unit (valid units are `seconds`, `minutes`, `hours`, `days`, and `weeks`)"
            )
        schedule = self._base_schedule()
        if self._until is not None:
            until_ms = self._until_ms()
            if until_ms < self._clock() * 1000:
                raise ConfigurationError("Cannot schedule a job to run until a time in the past")
            schedule = UntilSchedule(schedule, until_ms / 1000)
        return schedule

    def _base_schedule(self) -> Schedule:
        n = self.interval
        at = self.at_time
        tz = self.at_tz
        zone = "UTC" if tz is None else tz
        if self.start_day is not None:
            at = at or dtime(0, 0)
            dow = (_WEEKDAYS.index(self.start_day) + 1) % 7
            return CronSchedule(f"{at.minute} {at.hour} * * {dow}{_sec(at)}", zone)
        assert self.unit is not None
        period = n * _UNIT_SECONDS[self.unit]
        if at is None:
            offset = _MONDAY_OFFSET if self.unit == "weeks" else 0
            return IntervalSchedule(period, offset=offset)
        if self.unit == "days" and n == 1:
            return CronSchedule(f"{at.minute} {at.hour} * * *{_sec(at)}", zone)
        if tz is not None and _cronzone.fixed_offset(tz) != 0:
            if self.unit == "hours" and isinstance(n, int) and 24 % n == 0:
                hours = "*" if n == 1 else f"*/{n}"
                return CronSchedule(f"{at.minute} {hours} * * *{_sec(at)}", zone)
            if self.unit != "minutes":  # whole-minute offsets make :SS zone-independent
                raise ConfigurationError(
                    f"every({n}).{self.unit}.at({at}, tz={_cronzone.zone_key(tz)!r}) has no "
                    "shared grid in a zone with a UTC offset; use UTC or runner.cron(...)"
                )
        offset = at.hour * 3600 + at.minute * 60 + at.second
        return IntervalSchedule(period, offset=offset)

    def _until_ms(self) -> int:
        value = self._until
        zone = self.at_tz or timezone.utc
        now = datetime.fromtimestamp(self._clock(), zone)
        if isinstance(value, timedelta):
            moment = now + value
        elif isinstance(value, datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=zone)
        elif isinstance(value, dtime):
            moment = datetime.combine(now.date(), value.replace(tzinfo=None), tzinfo=zone)
        else:
            parsed = None
            for fmt in _UNTIL_FORMATS:
                try:
                    parsed = datetime.strptime(value, fmt)
                    break
                except ValueError:
                    continue
            if parsed is None:
                raise ConfigurationError(f"Invalid string format for until(): {value!r}")
            if "-" not in value:
                parsed = datetime.combine(now.date(), parsed.time())
            moment = parsed.replace(tzinfo=zone)
        return round(moment.timestamp() * 1000)

    def do(self, job_func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Translate the chain and register ``job_func``; returns what ``register`` returns."""
        if not callable(job_func):
            raise TypeError(f"do() needs a callable; got {job_func!r}")
        schedule = self.to_schedule()
        if self._register is None:
            raise ConfigurationError("this every() chain is not attached to a runner")
        return self._register(schedule, job_func, args, dict(kwargs), frozenset(self.tags))


def _sec(at: dtime) -> str:
    """The seconds field (croniter: LAST) when the time has seconds, else nothing."""
    return f" {at.second}" if at.second else ""
