"""Cron matches as instants in a timezone: the DST rules of
[`CronSchedule`][cronlock.schedules.CronSchedule].

Two layers, kept apart so each can be reasoned about alone:

1. **Naive wall-clock matching** (`CronSpec`, in `cronlock.schedules._cronexpr`):
   which wall-clock times match the expression, computed on "naive seconds" (a
   wall-clock time written as if it were UTC, so no DST exists). croniter does the
   field logic (``L``, ``W``, ``#``, ``H``).
2. **Mapping wall-clock matches to instants** (`next_after` and
   `latest_at_or_before`) in a PEP 495 timezone, with the DST rules below.

DST rules (Debian cron's, which cronsim implements; see ``tests/unit/test_cron_dst.py``):

- A **fixed-time** expression (5 or 6 fields whose minute *and* hour fields do not start
  with ``*``, e.g. ``30 2 * * *``, ``0 9-17 * * MON-FRI``, ``H H * * *``):

  - a wall time inside a spring-forward **gap** runs once, at the first instant after
    the gap (several matches inside one gap collapse into that one run);
  - a wall time inside an autumn **fold** runs once, at its first occurrence
    (``dst_fold="once"``), or at both occurrences (``dst_fold="both"``).

- Any other expression (minute or hour field starting with ``*``: ``*/5 * * * *``,
  ``30 * * * *``, ``0 */2 * * *``) matches *instants* whose wall time matches: it runs
  through a fold at every real interval (so twice for the repeated wall times) and
  skips wall times that do not exist in a gap.

Guarantee: the mapping is a pure function of (expression, hash id, timezone, fold
policy), so replicas agree. Limits: transitions less than two days apart are assumed
not to happen (true for every zone since 1970).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronlock.errors import ConfigurationError
from cronlock.schedules._cronexpr import CronSpec

_EPOCH = datetime(1970, 1, 1)
_TWO_DAYS = 2 * 86400
# A bound on loop iterations; each step moves strictly in one direction.
_MAX_STEPS = 10_000


class Zone:
    """A timezone seen as a function from instants and wall times to UTC offsets."""

    __slots__ = ("fixed", "tz")

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        offset = fixed_offset(tz)
        self.fixed: Optional[int] = offset

    def offset_at(self, instant: int) -> int:
        """The UTC offset (seconds) in force at ``instant`` (epoch seconds)."""
        if self.fixed is not None:
            return self.fixed
        off = datetime.fromtimestamp(instant, self.tz).utcoffset()
        assert off is not None
        return int(off.total_seconds())

    def wall_offsets(self, wall: int) -> tuple[int, int]:
        """The offsets for ``wall`` with fold=0 and fold=1 (PEP 495).

        Equal: an ordinary time. fold=0 larger: the wall time is in a fold (ambiguous).
        fold=0 smaller: the wall time is in a gap (it does not exist).
        """
        if self.fixed is not None:
            return self.fixed, self.fixed
        naive = _EPOCH + timedelta(seconds=wall)
        o0 = naive.replace(tzinfo=self.tz).utcoffset()
        o1 = naive.replace(tzinfo=self.tz, fold=1).utcoffset()
        assert o0 is not None
        assert o1 is not None
        return int(o0.total_seconds()), int(o1.total_seconds())

    def transition_in(self, lo: int, hi: int) -> int:
        """The first instant in (lo, hi] whose offset differs from the offset at ``lo``."""
        before = self.offset_at(lo)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.offset_at(mid) == before:
                lo = mid
            else:
                hi = mid
        return hi


def fixed_offset(tz: tzinfo) -> Optional[int]:
    """The offset of a zone that never changes it (UTC, fixed offsets), else None."""
    if isinstance(tz, timezone):
        off = tz.utcoffset(None)
        return int(off.total_seconds())
    if getattr(tz, "key", None) in ("UTC", "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Zulu"):
        return 0
    return None


def next_after(  # noqa: PLR0912  (one branch per DST case; clearer as one loop)
    spec: CronSpec, zone: Zone, both: bool, after: int
) -> Optional[int]:
    """The first slot instant strictly after ``after`` (epoch seconds), or None.

    ``both`` fires fixed-time jobs at both occurrences of a folded wall time; other
    jobs always do (they follow real time). See the module docstring.
    """
    if zone.fixed is not None:
        nxt = spec.next_naive(after + zone.fixed)
        return None if nxt is None else nxt - zone.fixed
    emit_second = both or not spec.fixed_time
    # Every wall-clock match at or before `wall` maps to an instant <= `after`.
    wall = after + min(zone.offset_at(after), zone.offset_at(after + _TWO_DAYS))
    best: Optional[int] = None
    for _ in range(_MAX_STEPS):
        m = spec.next_naive(wall)
        if m is None:
            return best
        o0, o1 = zone.wall_offsets(m)
        if o0 == o1:
            if m - o0 > after:
                return _min(best, m - o0)
            wall = m
        elif o0 > o1:  # fold: m - o0 is the first occurrence, m - o1 the second
            if m - o0 > after:
                return _min(best, m - o0)
            if emit_second and m - o1 > after:
                best = _min(best, m - o1)
                # A later match can only beat it through its first occurrence.
                wall = max(m, after + o0)
            else:
                wall = m
        else:  # gap: m does not exist
            end = zone.transition_in(m - o1, m - o0)
            if spec.fixed_time:
                if end > after:
                    return _min(best, end)
                wall = m
            else:
                wall = max(m, end + o1 - 1)  # skip the rest of the gap
    raise AssertionError(f"cron next_after did not converge for {spec.fields}")  # pragma: no cover


def latest_at_or_before(spec: CronSpec, zone: Zone, both: bool, at: int) -> Optional[int]:
    """The last slot instant at or before ``at`` (epoch seconds), or None."""
    if zone.fixed is not None:
        prev = spec.prev_naive(at + zone.fixed)
        return None if prev is None else prev - zone.fixed
    emit_second = both or not spec.fixed_time
    # Every wall-clock match after `wall` maps to an instant > `at`.
    wall = at + max(zone.offset_at(at), zone.offset_at(at - _TWO_DAYS))
    best: Optional[int] = None
    for _ in range(_MAX_STEPS):
        m = spec.prev_naive(wall)
        if m is None:
            return best
        o0, o1 = zone.wall_offsets(m)
        if o0 == o1:
            if m - o0 <= at:
                return _max(best, m - o0)
            wall = m - 1
        elif o0 > o1:  # fold
            if emit_second and m - o1 <= at:
                return _max(best, m - o1)
            if m - o0 <= at:
                if not emit_second:
                    return _max(best, m - o0)
                best = _max(best, m - o0)
                # An earlier match can only beat it through its second occurrence.
                wall = min(m - 1, at + o1)
            else:
                wall = m - 1
        else:  # gap
            end = zone.transition_in(m - o1, m - o0)
            if spec.fixed_time and end <= at:
                return _max(best, end)
            wall = min(m - 1, end + o0 - 1)  # skip the rest of the gap
    raise AssertionError(
        f"cron latest_at_or_before did not converge for {spec.fields}"
    )  # pragma: no cover


def _min(a: Optional[int], b: int) -> int:
    return b if a is None or b < a else a


def _max(a: Optional[int], b: int) -> int:
    return b if a is None or b > a else a


def zone_key(tz: tzinfo) -> str:
    """A stable name for a timezone, used in equality, repr and describe()."""
    key = getattr(tz, "key", None)
    if isinstance(key, str):
        return key
    return str(tz)


def check_tz(value: Any) -> tzinfo:
    """A timezone name or PEP 495 tzinfo; pytz zones are refused (they ignore fold)."""
    if isinstance(value, str):
        try:
            return ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise ConfigurationError(f"unknown timezone {value!r}") from None
    if isinstance(value, tzinfo):
        if hasattr(value, "localize"):
            raise ConfigurationError(
                f"pytz timezone {value!r} is not supported (it ignores PEP 495 fold); "
                f"pass the zone name, e.g. {str(value)!r}"
            )
        return value
    raise TypeError(f"timezone must be a zone name (str) or a tzinfo; got {value!r}")
