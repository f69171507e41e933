"""`CronSchedule`: cron expressions in a timezone, with Debian cron's DST rules."""

from __future__ import annotations

from datetime import tzinfo
from typing import Any, Optional, Union

from cronlock.errors import ConfigurationError
from cronlock.schedules import _cronexpr, _cronzone
from cronlock.schedules._base import Schedule


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

    DST (details and table in `cronlock.schedules._cronzone`): a fixed-time job whose wall time
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
        tz = _cronzone.check_tz(timezone)
        normalised = _cronexpr.normalise(expression)
        if not normalised:
            raise ConfigurationError(f"cron expression must not be empty; got {expression!r}")
        spec = _cronexpr.parse(normalised, hash_id if "h" in normalised.lower() else None)
        self._expression = " ".join(expression.split())
        self._spec = spec
        self._zone = _cronzone.Zone(tz)
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
        s = _cronzone.next_after(self._spec, self._zone, self._both, after_ms // 1000)
        return None if s is None else s * 1000

    def latest_at_or_before(self, at_ms: int) -> Optional[int]:
        """The last slot at or before ``at_ms``; None if there is none (within 50 years)."""
        s = _cronzone.latest_at_or_before(self._spec, self._zone, self._both, at_ms // 1000)
        return None if s is None else s * 1000

    def describe(self) -> str:
        """E.g. ``"cron '*/5 * * * *' in Europe/Athens"``."""
        text = f"cron {self._expression!r} in {_cronzone.zone_key(self._zone.tz)}"
        if self._both:
            text += " (DST fold: both)"
        if self._hash_id is not None:
            text += f" (hash id {self._hash_id!r})"
        return text

    def _key(self) -> tuple[Any, ...]:
        return (
            " ".join(self._spec.fields),
            _cronzone.zone_key(self._zone.tz),
            self._both,
            self._hash_id,
        )

    def __repr__(self) -> str:
        extra = ", dst_fold='both'" if self._both else ""
        if self._hash_id is not None:
            extra += f", hash_id={self._hash_id!r}"
        return f"CronSchedule({self._expression!r}, {_cronzone.zone_key(self._zone.tz)!r}{extra})"
