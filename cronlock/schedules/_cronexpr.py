"""Cron expressions as naive wall-clock matching.

For [`CronSchedule`][cronlock.schedules.CronSchedule], `parse` turns an expression
into a `CronSpec`: which wall-clock times match it, computed on "naive seconds" (a
wall-clock time written as if it were UTC, so no DST exists). croniter does the field
logic (``L``, ``W``, ``#``, ``H``); a `_FastSpec` answers the common expressions
without it. Mapping these matches to instants in a timezone, with the DST rules, is
the job of `cronlock.schedules._cronzone`.

This module imports croniter lazily (croniter imports dateutil, which imports
``threading``), so ``import cronlock.schedules`` stays free of threads until the first
cron expression is parsed.
"""

from __future__ import annotations

import bisect
import copy
import functools
import re
from datetime import date
from typing import TYPE_CHECKING, Any, Optional

from cronlock.errors import ConfigurationError

if TYPE_CHECKING:
    from croniter import croniter as Croniter


def _croniter() -> Any:
    """croniter, imported on first use (it pulls in dateutil, which imports threading)."""
    import croniter  # noqa: PLC0415  (lazy on purpose: see the module docstring)

    return croniter


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
        # Debian cron's rule for "fixed-time" jobs (see cronlock.schedules._cronzone).
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
