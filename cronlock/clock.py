"""The one source of time, and the rule for which clock decides what.

The time rule:

1. **Which slot is due** comes from the injected clock (`CronRunner(clock=...)`, a
   `Clock`): every replica computes the same slots from its own wall time, and tests
   skew one replica or drive the scheduler step by step without patching `datetime`.
2. **Lease and timeout deadlines** (when to renew, when a lease this replica holds has
   run out as far as it can tell, when a handler has run too long, how long to wait
   for a retry) come from the monotonic clock, [`monotonic()`][cronlock.clock.monotonic]:
   a wall clock that steps (NTP, a skewed replica) must not stretch or cut a lease.
3. **Lease validity** (whether a lease still holds) comes from the store's clock: the
   claim, renew and finish scripts read Redis's `TIME`, so replica clocks never decide it.

Records written for people (history entry times, "created at", durations shown to an
operator) use [`wall_ms()`][cronlock.clock.wall_ms] and [`utc_now()`][cronlock.clock.utc_now].
So do the operator's views: `Admin.jobs()` counts a run's lease as live by this
machine's clock, so an operator host whose clock is off shows a lease as live or lapsed
that much early or late; nothing decides anything on it.
Every read of time in the runner, the stores and the operator side goes through this
module; nothing else calls `time.time()`, `time.monotonic()` or `datetime.now()`.

A clock may be given as any object with ``time()`` and ``monotonic()`` methods, or as a
bare callable returning epoch seconds (like `time.time`).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Callable, Protocol, Union, runtime_checkable

from cronlock.errors import ConfigurationError


@runtime_checkable
class Clock(Protocol):
    """What cronlock needs to know about time."""

    def time(self) -> float:
        """Wall-clock time in seconds since the Unix epoch."""

    def monotonic(self) -> float:
        """A clock that never goes backwards, for measuring durations."""


ClockLike = Union[Clock, Callable[[], float], None]


class SystemClock:
    """The real clocks: `time.time` and `time.monotonic`."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return "SystemClock()"


class OffsetClock(SystemClock):
    """The system clock shifted by ``offset`` seconds: a replica whose clock is wrong."""

    def __init__(self, offset: float) -> None:
        self.offset = float(offset)

    def time(self) -> float:
        return time.time() + self.offset

    def __repr__(self) -> str:
        return f"OffsetClock({self.offset!r})"


class CallableClock(SystemClock):
    """Wraps a callable returning epoch seconds; durations still use the monotonic clock."""

    def __init__(self, func: Callable[[], float]) -> None:
        self.func = func

    def time(self) -> float:
        return float(self.func())

    def __repr__(self) -> str:
        return f"CallableClock({self.func!r})"


class FakeClock:
    """A clock that moves only when told to; for driving ``run_pending()`` in tests.

    Example:
        ```python
        clock = FakeClock(1_700_000_000.0)
        clock.advance(30)
        ```
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._mono = 0.0
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``."""
        if seconds < 0:
            raise ValueError(f"FakeClock.advance needs seconds >= 0, got {seconds!r}")
        with self._lock:
            self._now += seconds
            self._mono += seconds

    def set(self, epoch_seconds: float) -> None:
        """Jump the wall clock (forwards or backwards); the monotonic clock is untouched."""
        with self._lock:
            self._now = float(epoch_seconds)

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r})"


def sleep(seconds: float) -> None:
    """Wait ``seconds`` on the real clock (a short back-off between store calls)."""
    time.sleep(seconds)


def wall_ms() -> int:
    """This machine's wall clock, epoch ms: for records written for people, never to
    decide which slot is due (that is the injected clock) nor whether a lease holds."""
    return round(time.time() * 1000)


def utc_now() -> datetime:
    """This machine's wall clock as an aware UTC datetime (records for people)."""
    return datetime.now(timezone.utc)


def as_clock(clock: ClockLike) -> Clock:
    """Accept a [`Clock`][cronlock.clock.Clock], a callable returning epoch seconds, or
    ``None`` (system)."""
    if clock is None:
        return SystemClock()
    if isinstance(clock, Clock):
        return clock
    if callable(clock):
        return CallableClock(clock)
    raise ConfigurationError(
        f"clock must be a Clock, a callable returning epoch seconds, or None; got {clock!r}"
    )


def monotonic() -> float:
    """Seconds on this process's monotonic clock: the one source of deadlines.

    Lease and timeout deadlines (a lock's `remaining()`, when to renew, how long to wait)
    use it rather than an injected `Clock`: they measure how long ago a request was
    *sent*, which must not jump when the wall clock is stepped (NTP, a skewed replica, a
    test's fake clock). Whether a lease is still valid is decided on Redis's clock.
    """
    return time.monotonic()
