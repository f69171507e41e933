"""Property-based fuzz of the parsers that read what users type: cron expressions, the
``every()`` DSL, durations, Redis URLs.

Whatever the input, a parser either accepts it or raises the documented error whose
message names the input (a ConfigurationError, which is a ValueError, or a TypeError for
a value of the wrong type): never another exception, never a crash deeper down. Bounded
for the fast suite (a couple of hundred examples each, no example database).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronlock._durations import parse_duration, seconds_to_ms
from cronlock._redisurl import client_from_url, redis_url
from cronlock.errors import ConfigurationError
from cronlock.schedules import CronSchedule
from cronlock.schedules._every import Every

FUZZ = settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
T = 1_800_000_000_000  # epoch ms

CRON_TOKENS = st.sampled_from(
    ["*", "?", "L", "W", "#", "/", "-", ",", "0", "1", "5", "7", "12", "31", "59", "60", "99",
     "MON", "jan", "FRI-SUN", "*/15", "1-5", "L-2", "15W", "5#3", "5L", "@daily", "H", ""]
)  # fmt: skip
CRON_FIELD = st.lists(CRON_TOKENS, min_size=1, max_size=4).map("".join)
CRON_TEXT = st.one_of(
    st.lists(CRON_FIELD, min_size=1, max_size=7).map(" ".join),
    st.text(max_size=40),
)


def _refused_naming(error: BaseException, *names: str) -> bool:
    return isinstance(error, (ConfigurationError, TypeError)) and any(
        n in str(error) for n in names
    )


@FUZZ
@given(CRON_TEXT)
def test_a_cron_expression_parses_or_is_refused_naming_it(text: str) -> None:
    """Any text: a schedule whose next fire time is later, or ConfigurationError naming it."""
    made: list[CronSchedule] = []
    error = _call(lambda: made.append(CronSchedule(text)))
    if error is not None:
        assert isinstance(error, ConfigurationError), repr(error)
        assert "cron expression" in str(error)
        return
    nxt = made[0].next_after(T)
    assert nxt is None or nxt > T


@FUZZ
@given(
    st.one_of(
        st.integers(-5, 10**6),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.none(),
        st.booleans(),
    ),
    st.sampled_from(["seconds", "minutes", "hours", "days", "weeks", "second", "day"]),
    st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["10:30", ":30", "25:00"])),
)
def test_every_accepts_a_chain_or_refuses_it_naming_the_value(
    interval: Any, unit: str, at: Any
) -> None:
    """every(n).<unit>.at(t).do(fn): a schedule, or a ConfigurationError / TypeError."""
    made: list[Any] = []

    def register(schedule: Any, *rest: Any) -> Any:
        made.append(schedule)
        return schedule

    def chain() -> None:
        every = getattr(Every(interval, register, clock=lambda: T / 1000), unit)
        (every if at is None else every.at(at)).do(print)

    error = _call(chain)
    if error is not None:
        assert isinstance(error, (ConfigurationError, TypeError)), repr(error)
        assert str(error)
        return
    assert len(made) == 1
    assert made[0].next_after(T) > T


@FUZZ
@given(
    st.one_of(
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.none(),
        st.booleans(),
    )
)
def test_seconds_become_milliseconds_or_are_refused_naming_the_option(value: Any) -> None:
    """seconds_to_ms: whole ms >= 1, or an error naming the option."""
    got: list[int] = []
    error = _call(lambda: got.append(seconds_to_ms(value, "ttl of job 'k'")))
    if error is not None:
        assert _refused_naming(error, "ttl of job 'k'"), repr(error)
        return
    [ms] = got
    assert isinstance(ms, int)
    assert ms >= 1
    assert math.isclose(ms, float(value) * 1000, abs_tol=0.5)


@FUZZ
@given(st.text(max_size=12))
def test_a_duration_parses_or_is_refused_naming_it(text: str) -> None:
    """Any text: seconds > 0, or ConfigurationError naming the option and the text."""
    got: list[float] = []
    error = _call(lambda: got.append(parse_duration(text, "--expires")))
    if error is not None:
        assert isinstance(error, ConfigurationError), repr(error)
        assert "--expires" in str(error)
        assert repr(text) in str(error)
        return
    [seconds] = got
    assert math.isfinite(seconds)
    assert seconds > 0


@FUZZ
@given(st.integers(1, 10**6), st.sampled_from(["", "s", "m", "h", "d", "M", "H"]))
def test_a_written_duration_reads_back(number: int, unit: str) -> None:
    """``<n><unit>`` is n seconds, minutes, hours or days."""
    factor = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit.lower()]
    assert parse_duration(f"{number}{unit}", "d") == number * factor


URL_TAIL = st.text(alphabet=st.sampled_from([*"abc019:@/?=&%.-_[] ", "\x00", "é"]), max_size=24)


@FUZZ
@given(
    st.one_of(
        st.tuples(
            st.sampled_from(["redis", "rediss", "unix", "valkey", "valkeys", "http", "REDIS", ""]),
            st.sampled_from(["://", ":/", ""]),
            URL_TAIL,
        ).map("".join),
        st.text(max_size=20),
    )
)
def test_a_redis_url_gives_a_client_or_is_refused(url: str) -> None:
    """Any text: a client (nothing connects), or a ValueError; the scheme check names it."""
    got: list[str] = []
    error = _call(lambda: got.append(redis_url(url)))
    if error is not None:
        assert isinstance(error, ConfigurationError), repr(error)
        assert "Redis URL" in str(error)
        return
    assert got[0].split("://")[0] in {"redis", "rediss", "unix"}
    clients: list[Any] = []
    error = _call(lambda: clients.append(client_from_url(url, socket_connect_timeout=0.01)))
    # redis-py's own refusal of a malformed URL is a ValueError (the CLI's usage error)
    assert error is None or isinstance(error, ValueError), repr(error)
    for client in clients:
        client.close()


def _call(fn: Callable[[], Any]) -> Exception | None:
    """What ``fn()`` raised (None if nothing): the property then says what it may be."""
    try:
        fn()
    except Exception as error:
        return error
    return None
