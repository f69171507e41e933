"""The `Schedule` base class and the instant and duration parsing every schedule shares."""

from __future__ import annotations

import abc
import math
from datetime import datetime, timedelta, timezone
from typing import Any, Optional, Union

from cronlock.errors import ConfigurationError

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
        return aware_ms(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{name} must be an aware datetime, an ISO-8601 string or epoch seconds; got {value!r}"
        )
    if not math.isfinite(value):
        raise ConfigurationError(f"{name} must be finite epoch seconds; got {value!r}")
    return round(value * 1000)


def aware_ms(value: datetime) -> int:
    offset = value.utcoffset()
    assert offset is not None
    naive = value.replace(tzinfo=None) - offset
    delta = naive - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def iso(ms: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=_UTC) + timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
