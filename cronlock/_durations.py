"""Durations given in seconds, as the whole milliseconds every part of cronlock counts in.

Pure (no redis, no threads), so the schedules use it as well as the lock, the runner
and the job options: one conversion, one set of messages.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, Union

from cronlock.errors import ConfigurationError

Seconds = Union[int, float, timedelta]


def seconds_to_ms(value: Any, name: str, *, allow_zero: bool = False, signed: bool = False) -> int:
    """Convert seconds (int, float or timedelta) to whole milliseconds, refusing nonsense.

    Millisecond precision is kept: 0.25 s is 250 ms, not truncated to 0 s.

    Args:
        value: the seconds.
        name: what the value is, for the messages (`"ttl of job 'k'"`).
        allow_zero: accept 0 (else the least is 1 ms).
        signed: accept any finite value, negative too (offsets); bounds are the
            caller's.

    Raises:
        TypeError: not an int, float or timedelta (a bool is refused).
        ConfigurationError: NaN, infinite, or out of bounds; the message names `value`.
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds as int, float or timedelta; got {value!r}")
    else:
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond any float
            seconds = math.inf
    if not math.isfinite(seconds * 1000):  # 1e308 s is finite, its ms are not
        raise ConfigurationError(f"{name} must be a finite number of seconds; got {value!r}")
    ms = round(seconds * 1000)
    if signed:
        return ms
    if ms < 0 or (ms == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0 (at least 1 ms)"
        raise ConfigurationError(f"{name} must be {bound}; got {value!r}")
    return ms


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, name: str) -> float:
    """Seconds from a command-line duration: ``90``, ``90s``, ``1.5m``, ``2h``, ``1d``.

    Raises:
        ConfigurationError: not a positive finite number with an optional unit
            (``s``, ``m``, ``h``, ``d``); the message names ``name`` and ``text``.
    """
    value = text.strip().lower() if isinstance(text, str) else ""
    unit = value[-1:] if value[-1:] in _UNITS else ""
    number = value[: len(value) - len(unit)]
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        seconds = math.nan
    if not number or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(
            f"{name} must be a duration > 0 such as 90, 90s, 5m, 2h or 1d; got {text!r}"
        )
    return seconds
