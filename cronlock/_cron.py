"""Cron arithmetic for [`CronSchedule`][cronlock.schedules.CronSchedule]: parsing and DST rules.

Two layers, kept apart so each can be reasoned about alone:

1. **Naive wall-clock matching** (`CronSpec`): which wall-clock times match the
   expression, computed on "naive seconds" (a wall-clock time written as if it were
   UTC, so no DST exists). croniter does the field logic (``L``, ``W``, ``#``, ``H``).
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

This module imports croniter lazily (croniter imports dateutil, which imports
``threading``), so ``import cronlock.schedules`` stays free of threads until the first
cron expression is parsed.
"""

from __future__ import annotations

import bisect
import copy
import functools
import re
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Any, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronlock.errors import ConfigurationError

if TYPE_CHECKING:
    from croniter import croniter as Croniter


def _croniter() -> Any:
    """croniter, imported on first use (it pulls in dateutil, which imports threading)."""
    import croniter  # noqa: PLC0415  (lazy on purpose: see the module docstring)

    return croniter


_UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1)
_TWO_DAYS = 2 * 86400
# A bound on loop iterations; each step moves strictly in one direction.
_MAX_STEPS = 10_000

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_HASH_RE = re.compile(r"(?:^|,)h(?:\(|/|,|$)")
_RANDOM_RE = re.compile(r"(?:^|,)r(?:\(|/|,|$)")


class CronSpec:
    """A parsed expression: naive wall-clock matching, shared by equal schedules.

    Instances are cached by `parse`; they are immutable after construction
    (each query works on a shallow copy of the croniter template, so concurrent
    callers do not share croniter's mutable cursor).
    """

    __slots__ = ("_period_s", "_template", "fields", "fixed_time", "uses_hash")

    def __init__(self, template: Croniter, fields: tuple[str, ...], uses_hash: bool) -> None:
        self._template = template
        self.fields = fields
        self.uses_hash = uses_hash
        # Debian cron's rule for "fixed-time" jobs (see the module docstring).
        self.fixed_time = not fields[0].startswith("*") and not fields[1].startswith("*")
        self._period_s: Optional[int] = None

    def next_naive(self, wall: int) -> Optional[int]:
        """The first matching wall time strictly after ``wall`` (naive seconds)."""
        try:
            return int(copy.copy(self._template).get_next(float, start_time=float(wall)))
        except _croniter().CroniterBadDateError:
            return None

    def prev_naive(self, wall: int) -> Optional[int]:
        """The last matching wall time at or before ``wall`` (naive seconds)."""
        try:
            return int(copy.copy(self._template).get_prev(float, start_time=float(wall + 1)))
        except _croniter().CroniterBadDateError:
            return None

    @property
    def period_s(self) -> int:
        """The smallest gap between consecutive matches over a sample of 32 matches."""
        if self._period_s is None:
            gaps = []
            wall: Optional[int] = 1_704_067_200  # 2024-01-01T00:00, an arbitrary start
            for _ in range(32):
                assert wall is not None
                nxt = self.next_naive(wall)
                if nxt is None:
                    break
                gaps.append(nxt - wall)
                wall = nxt
            self._period_s = min(gaps[1:] or gaps)
        return self._period_s


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MAX_DAYS = 50 * 366  # croniter's horizon: no match within 50 years means none


class _FastSpec(CronSpec):
    """Naive matching on plain field sets, ~10x faster than croniter per query.

    Used when every field is a plain set of values (no ``L``, ``W``, ``#``); the oracle
    test checks it against cronsim and the croniter-backed path gives the same answers.
    """

    __slots__ = ("_day_or", "_dom", "_dow", "_h", "_m", "_months", "_s")

    def __init__(
        self,
        template: Croniter,
        fields: tuple[str, ...],
        uses_hash: bool,
        sets: list[list[int]],
        day_or: bool,
    ) -> None:
        super().__init__(template, fields, uses_hash)
        self._m, self._h, dom, months, dow, self._s = sets
        self._dom = frozenset(dom)
        self._months = frozenset(months)
        self._dow = frozenset(d % 7 for d in dow)
        self._day_or = day_or

    @classmethod
    def from_template(
        cls, template: Croniter, fields: tuple[str, ...], uses_hash: bool
    ) -> Optional[_FastSpec]:
        """A fast spec for plain expressions, or None when croniter must do the work."""
        expanded: list[list[Any]] = [list(f) for f in template.expanded]
        if template.nth_weekday_of_month or template.nearest_weekday:
            return None
        full = (range(60), range(24), range(1, 32), range(1, 13), range(7), range(60))
        sets: list[list[int]] = []
        for index, values in enumerate(expanded if len(expanded) == 6 else [*expanded, [0]]):
            if values == ["*"]:
                sets.append(list(full[index]))
            elif all(isinstance(v, int) for v in values):
                sets.append(sorted({int(v) for v in values}))
            else:
                return None
        raw = template.expressions
        day_or = (
            expanded[2] != ["*"]
            and expanded[4] != ["*"]
            and not raw[2].startswith("*")
            and not raw[4].startswith("*")
        )
        return cls(template, fields, uses_hash, sets, day_or)

    def _day_ok(self, day: int) -> bool:
        d = date.fromordinal(day + _EPOCH_ORDINAL)
        if d.month not in self._months:
            return False
        dom_ok = d.day in self._dom
        dow_ok = (day + 4) % 7 in self._dow  # 1970-01-01 was a Thursday (cron 4)
        return (dom_ok or dow_ok) if self._day_or else (dom_ok and dow_ok)

    def next_naive(self, wall: int) -> Optional[int]:
        """The first matching wall time strictly after ``wall`` (naive seconds)."""
        day, tod = divmod(wall, 86400)
        if self._day_ok(day):
            t = self._next_tod(tod)
            if t is not None:
                return day * 86400 + t
        for d in range(day + 1, day + _MAX_DAYS):
            if self._day_ok(d):
                return d * 86400 + self._h[0] * 3600 + self._m[0] * 60 + self._s[0]
        return None

    def prev_naive(self, wall: int) -> Optional[int]:
        """The last matching wall time at or before ``wall`` (naive seconds)."""
        day, tod = divmod(wall, 86400)
        if self._day_ok(day):
            t = self._prev_tod(tod)
            if t is not None:
                return day * 86400 + t
        for d in range(day - 1, day - _MAX_DAYS, -1):
            if self._day_ok(d):
                return d * 86400 + self._h[-1] * 3600 + self._m[-1] * 60 + self._s[-1]
        return None

    def _next_tod(self, tod: int) -> Optional[int]:
        h, rem = divmod(tod, 3600)
        m, s = divmod(rem, 60)
        hs, ms, ss = self._h, self._m, self._s
        hi = bisect.bisect_left(hs, h)
        if hi < len(hs) and hs[hi] == h:
            mi = bisect.bisect_left(ms, m)
            if mi < len(ms) and ms[mi] == m:
                si = bisect.bisect_right(ss, s)
                if si < len(ss):
                    return tod - s + ss[si]
                mi += 1
            if mi < len(ms):
                return h * 3600 + ms[mi] * 60 + ss[0]
            hi += 1
        if hi < len(hs):
            return hs[hi] * 3600 + ms[0] * 60 + ss[0]
        return None

    def _prev_tod(self, tod: int) -> Optional[int]:
        h, rem = divmod(tod, 3600)
        m, s = divmod(rem, 60)
        hs, ms, ss = self._h, self._m, self._s
        hi = bisect.bisect_right(hs, h) - 1
        if hi >= 0 and hs[hi] == h:
            mi = bisect.bisect_right(ms, m) - 1
            if mi >= 0 and ms[mi] == m:
                si = bisect.bisect_right(ss, s) - 1
                if si >= 0:
                    return tod - s + ss[si]
                mi -= 1
            if mi >= 0:
                return h * 3600 + ms[mi] * 60 + ss[-1]
            hi -= 1
        if hi >= 0:
            return hs[hi] * 3600 + ms[-1] * 60 + ss[-1]
        return None


def normalise(expression: str) -> str:
    """The expression with aliases resolved to their fields and whitespace collapsed."""
    text = " ".join(expression.split())
    return ALIASES.get(text.lower(), text)


@functools.lru_cache(maxsize=4096)
def parse(expression: str, hash_id: Optional[str]) -> CronSpec:
    """Parse a normalised expression once; equal (expression, hash id) share a spec.

    Raises:
        ConfigurationError: the expression is not valid cron, uses ``R`` (random,
            which replicas could not agree on), uses ``H`` without a hash id, has the
            wrong number of fields, or never matches.
    """
    cron = _croniter()
    fields = tuple(expression.split(" "))
    if len(fields) not in (5, 6):
        raise ConfigurationError(
            f"cron expression {expression!r} must have 5 fields (minute hour day month "
            f"weekday) or 6 (the same plus seconds LAST); got {len(fields)}"
        )
    lowered = [f.lower() for f in fields]
    if any(_RANDOM_RE.search(f) for f in lowered):
        raise ConfigurationError(
            f"cron expression {expression!r} uses R (random): every replica would pick a "
            "different time, so the slot could not be shared; use H with a hash id instead"
        )
    uses_hash = any(_HASH_RE.search(f) for f in lowered)
    if uses_hash and hash_id is None:
        raise ConfigurationError(
            f"cron expression {expression!r} uses H (hashed) and needs a hash_id "
            "(the runner passes the job key)"
        )
    try:
        template = cron.croniter(
            expression,
            0.0,
            hash_id=hash_id if uses_hash else None,
            implement_cron_bug=True,
        )
    except (cron.CroniterBadCronError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise ConfigurationError(f"invalid cron expression {expression!r}: {exc}") from None
    spec: CronSpec = CronSpec(template, fields, uses_hash)
    fast = _FastSpec.from_template(template, fields, uses_hash)
    if fast is not None:
        spec = fast
    try:
        copy.copy(template).get_next(float, start_time=946_684_800.0)
    except cron.CroniterBadDateError:
        raise ConfigurationError(
            f"cron expression {expression!r} never matches (no date within 50 years)"
        ) from None
    return spec


class Zone:
    """A timezone seen as a function from instants and wall times to UTC offsets."""

    __slots__ = ("fixed", "tz")

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        offset = _fixed_offset(tz)
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


def _fixed_offset(tz: tzinfo) -> Optional[int]:
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
