"""Slot arithmetic of every schedule: grid, validation, equality, properties, speed."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlock.errors import ConfigurationError
from cronlock.schedules import (
    CronSchedule,
    IntervalSchedule,
    OnceSchedule,
    Schedule,
    UntilSchedule,
)

T_MIN = 0
T_MAX = 4_102_444_800_000  # 2100-01-01 in ms
instants = st.integers(min_value=T_MIN, max_value=T_MAX)
periods = st.integers(min_value=1, max_value=10 * 86_400_000)
CRON_SAMPLES = [
    ("*/5 * * * *", "Europe/Athens", "once"),
    ("30 2 * * *", "America/New_York", "once"),
    ("30 1 * * *", "America/New_York", "both"),
    ("45 1 * * *", "Australia/Lord_Howe", "both"),
    ("0 */2 * * *", "Australia/Lord_Howe", "once"),
    ("0 0 L * *", "Europe/London", "once"),
    ("*/20 * * * * 10", "UTC", "once"),
    ("0 9 * * MON-FRI", "Asia/Kolkata", "once"),
]


# Interval -----------------------------------------------------------------


def test_interval_slots_lie_on_the_utc_epoch_grid() -> None:
    """Every 30 s means :00 and :30 of each UTC minute, whatever the start."""
    s = IntervalSchedule(30)
    assert s.next_after(1_000) == 30_000
    assert s.next_after(30_000) == 60_000
    assert s.latest_at_or_before(59_999) == 30_000
    assert s.latest_at_or_before(60_000) == 60_000


def test_interval_offset_shifts_the_grid() -> None:
    """offset=15 puts a 60 s grid on :15 of each minute."""
    s = IntervalSchedule(60, offset=15)
    assert s.next_after(0) == 15_000
    assert s.next_after(15_000) == 75_000
    assert s.offset_ms == 15_000


def test_interval_offset_is_normalised_modulo_the_period() -> None:
    """Offsets outside [0, period) name the same grid and compare equal."""
    assert IntervalSchedule(60, offset=-5) == IntervalSchedule(60, offset=55)
    assert IntervalSchedule(60, offset=125).offset_ms == 5_000


def test_interval_accepts_float_and_timedelta_with_ms_precision() -> None:
    """0.25 s is 250 ms; timedelta(minutes=1) is 60 000 ms."""
    assert IntervalSchedule(0.25).period_ms == 250
    assert IntervalSchedule(timedelta(minutes=1)).period_ms == 60_000
    assert IntervalSchedule(1, offset=timedelta(milliseconds=300)).next_after(0) == 300


@pytest.mark.parametrize("bad", [0, -1, 0.0001, -0.5], ids=repr)
def test_interval_refuses_non_positive_period(bad: float) -> None:
    """A period under 1 ms is refused, naming the value."""
    with pytest.raises(ConfigurationError, match=repr(bad).replace(".", r"\.")):
        IntervalSchedule(bad)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=repr)
def test_interval_refuses_nan_and_infinity(bad: float) -> None:
    """NaN and infinite periods or offsets are configuration errors."""
    with pytest.raises(ConfigurationError):
        IntervalSchedule(bad)
    with pytest.raises(ConfigurationError):
        IntervalSchedule(10, offset=bad)


@pytest.mark.parametrize("bad", ["10", None, True, [1]], ids=repr)
def test_interval_refuses_wrong_types(bad: object) -> None:
    """Strings, None and bools are TypeErrors, not numbers."""
    with pytest.raises(TypeError):
        IntervalSchedule(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        IntervalSchedule(10, offset=bad)  # type: ignore[arg-type]


def test_interval_describe_and_repr() -> None:
    """describe() and repr() name the period and the offset."""
    assert IntervalSchedule(3600, offset=900).describe() == "every 1 h on the UTC grid + 900 s"
    assert repr(IntervalSchedule(0.5)) == "IntervalSchedule(0.5)"
    assert repr(IntervalSchedule(60, offset=15)) == "IntervalSchedule(60, offset=15)"


@given(periods, st.integers(min_value=0, max_value=10 * 86_400_000), instants)
def test_interval_property_slots_on_grid_and_strictly_increasing(
    period: int, offset: int, t: int
) -> None:
    """next_after lands on the grid, strictly after t, and no grid point is skipped."""
    s = IntervalSchedule(period / 1000, offset=offset / 1000)
    n = s.next_after(t)
    assert n > t
    assert (n - s.offset_ms) % s.period_ms == 0
    assert n - s.period_ms <= t
    assert s.next_after(n) == n + s.period_ms


@given(periods, instants)
def test_interval_property_latest_and_next_are_inverse(period: int, t: int) -> None:
    """next_after(latest(t)) > t and latest(next_after(t)) == next_after(t)."""
    s = IntervalSchedule(period / 1000)
    latest = s.latest_at_or_before(t)
    assert latest <= t < s.next_after(latest)
    assert s.latest_at_or_before(s.next_after(t)) == s.next_after(t)


# Cron ---------------------------------------------------------------------


@given(st.sampled_from(CRON_SAMPLES), instants)
@settings(max_examples=300, deadline=None)
def test_cron_property_next_and_latest_are_consistent(case: tuple[str, str, str], t: int) -> None:
    """next_after(t) > t, latest(next) == next, next_after(latest(t)) > t, whole seconds."""
    s = CronSchedule(case[0], case[1], dst_fold=case[2])
    n = s.next_after(t)
    assert n is not None
    assert n > t
    assert n % 1000 == 0
    assert s.latest_at_or_before(n) == n
    latest = s.latest_at_or_before(t)
    assert latest is not None
    assert latest <= t
    assert s.next_after(latest) == n


@given(st.sampled_from(CRON_SAMPLES), instants)
@settings(max_examples=100, deadline=None)
def test_cron_property_no_slot_between_latest_and_next(case: tuple[str, str, str], t: int) -> None:
    """No slot lies strictly between latest_at_or_before(t) and next_after(t)."""
    s = CronSchedule(case[0], case[1], dst_fold=case[2])
    latest, n = s.latest_at_or_before(t), s.next_after(t)
    assert latest is not None
    assert n is not None
    assert s.next_after(latest) == n
    assert s.latest_at_or_before(n - 1) == latest


def test_cron_six_fields_put_seconds_last() -> None:
    """'0 12 * * * 30' is 12:00:30 every day (croniter's order)."""
    s = CronSchedule("0 12 * * * 30")
    assert s.next_after(0) == (12 * 3600 + 30) * 1000


@pytest.mark.parametrize(
    ("alias", "fields"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
    ],
)
def test_cron_aliases_equal_their_fields(alias: str, fields: str) -> None:
    """Aliases mean their usual fields, even with a hash id given."""
    assert CronSchedule(alias, hash_id="job") == CronSchedule(fields)
    assert CronSchedule(alias).next_after(86_400_000) == CronSchedule(fields).next_after(86_400_000)


def test_cron_hash_needs_a_hash_id_and_is_stable_per_id() -> None:
    """H spreads jobs by key: same key, same minute; no key is refused."""
    with pytest.raises(ConfigurationError, match="hash_id"):
        CronSchedule("H * * * *")
    a = CronSchedule("H * * * *", hash_id="billing")
    assert a.next_after(0) == CronSchedule("H * * * *", hash_id="billing").next_after(0)
    minutes = {CronSchedule("H * * * *", hash_id=f"job{i}").next_after(0) for i in range(20)}
    assert len(minutes) > 1
    assert "billing" in a.describe()


def test_cron_hash_id_is_ignored_without_h() -> None:
    """A hash id does not change (or distinguish) an expression without H."""
    assert CronSchedule("*/5 * * * *", hash_id="x") == CronSchedule("*/5 * * * *")


@pytest.mark.parametrize(
    "expression",
    ["", "* * * *", "61 * * * *", "* 25 * * *", "* * * * * * * *", "R * * * *", "nonsense"],
    ids=repr,
)
def test_cron_refuses_invalid_expressions_naming_them(expression: str) -> None:
    """Invalid, random (R) and wrong-length expressions are refused by name."""
    with pytest.raises(ConfigurationError) as info:
        CronSchedule(expression)
    assert repr(expression) in str(info.value)


def test_cron_refuses_an_expression_that_never_matches() -> None:
    """30 February never comes."""
    with pytest.raises(ConfigurationError, match="never matches"):
        CronSchedule("0 0 30 2 *")


def test_cron_refuses_unknown_timezone_and_bad_fold() -> None:
    """Unknown zones and fold policies are configuration errors naming the value."""
    with pytest.raises(ConfigurationError, match="Mars/Olympus"):
        CronSchedule("* * * * *", "Mars/Olympus")
    with pytest.raises(ConfigurationError, match="twice"):
        CronSchedule("* * * * *", dst_fold="twice")


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((5,), {}), (("* * * * *", 3), {}), (("* * * * *",), {"hash_id": 3})],
    ids=["expression", "timezone", "hash_id"],
)
def test_cron_refuses_wrong_types(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    """Non-string expressions, timezones and hash ids are TypeErrors."""
    with pytest.raises(TypeError):
        CronSchedule(*args, **kwargs)  # type: ignore[arg-type]


def test_cron_accepts_tzinfo_objects() -> None:
    """A ZoneInfo or fixed offset works like its name."""
    assert CronSchedule("0 3 * * *", ZoneInfo("Europe/Athens")) == CronSchedule(
        "0 3 * * *", "Europe/Athens"
    )
    plus2 = CronSchedule("0 3 * * *", timezone(timedelta(hours=2)))
    assert plus2.next_after(0) == 3600_000


def test_cron_equality_repr_describe() -> None:
    """Equal settings compare equal and hash alike; repr and describe name them."""
    a = CronSchedule("*/5  * * * *", "Europe/Athens")
    assert a == CronSchedule("*/5 * * * *", "Europe/Athens")
    assert hash(a) == hash(CronSchedule("*/5 * * * *", "Europe/Athens"))
    assert a != CronSchedule("*/5 * * * *", "Europe/London")
    assert a != CronSchedule("*/5 * * * *", "Europe/Athens", dst_fold="both")
    assert a.describe() == "cron '*/5 * * * *' in Europe/Athens"
    assert repr(a) == "CronSchedule('*/5 * * * *', 'Europe/Athens')"
    assert a.period_ms == 300_000
    assert CronSchedule("0 9 * * *").period_ms == 86_400_000


def test_cron_day_fields_follow_debian_rules() -> None:
    """Both day fields restricted: OR; one starting with '*': AND (Debian cron)."""
    either = CronSchedule("0 0 13 * 5")  # the 13th or a Friday
    both = CronSchedule("0 0 */13 * 5")  # a Friday that is the 1st, 14th or 27th
    jan1 = int(datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
    assert either.next_after(jan1) == jan1 + 4 * 86_400_000  # Fri 5 Jan
    first = both.next_after(jan1)
    assert first is not None
    day = datetime.fromtimestamp(first / 1000, timezone.utc)
    assert day.weekday() == 4
    assert day.day in (1, 14, 27)


# One-off and until --------------------------------------------------------


def test_once_has_one_slot() -> None:
    """A one-off slot is next before it, latest from it on, and has no period."""
    s = OnceSchedule("2030-01-01T00:00:00Z")
    at = 1_893_456_000_000
    assert s.next_after(at - 1) == at
    assert s.next_after(at) is None
    assert s.latest_at_or_before(at) == at
    assert s.latest_at_or_before(at - 1) is None
    assert s.period_ms is None
    assert s.describe() == "once at 2030-01-01T00:00:00+00:00"


def test_once_accepts_aware_datetime_iso_and_epoch_seconds() -> None:
    """All three forms of the same instant give equal schedules."""
    aware = datetime(2030, 1, 1, 2, tzinfo=ZoneInfo("Europe/Athens"))
    assert OnceSchedule(aware) == OnceSchedule("2030-01-01T00:00:00+00:00")
    assert OnceSchedule(1_893_456_000) == OnceSchedule("2030-01-01T00:00:00Z")
    assert OnceSchedule(1.5).at_ms == 1500


def test_once_refuses_naive_and_malformed_values() -> None:
    """Naive datetimes and strings without an offset are refused, not guessed."""
    with pytest.raises(ConfigurationError, match="naive"):
        OnceSchedule(datetime(2030, 1, 1))
    with pytest.raises(ConfigurationError, match="naive"):
        OnceSchedule("2030-01-01T00:00:00")
    with pytest.raises(ConfigurationError, match="tomorrow"):
        OnceSchedule("tomorrow")
    with pytest.raises(ConfigurationError):
        OnceSchedule(math.nan)
    with pytest.raises(TypeError):
        OnceSchedule(True)  # type: ignore[arg-type]


def test_until_stops_after_the_bound_inclusive() -> None:
    """A slot exactly at until runs; none after it; latest is capped at until."""
    s = UntilSchedule(IntervalSchedule(60), "1970-01-01T00:02:00Z")
    assert s.next_after(60_000) == 120_000
    assert s.next_after(120_000) is None
    assert s.latest_at_or_before(10**9) == 120_000
    assert s.period_ms == 60_000
    assert s == UntilSchedule(IntervalSchedule(60), 120)
    assert s.describe() == "every 1 min on the UTC grid, until 1970-01-01T00:02:00+00:00"


def test_until_refuses_a_non_schedule() -> None:
    """The wrapped value must be a Schedule."""
    with pytest.raises(TypeError):
        UntilSchedule("* * * * *", 0)  # type: ignore[arg-type]


def test_schedules_of_different_kinds_are_not_equal() -> None:
    """An interval and a cron with the same slots are still different schedules."""
    assert IntervalSchedule(60) != CronSchedule("* * * * *")
    assert isinstance(IntervalSchedule(60), Schedule)


# Speed (generous bounds: these catch regressions of 10x, not jitter) -------


def test_interval_construction_is_cheap() -> None:
    """100 000 interval schedules are built in well under a second (< 3 µs each here)."""
    start = time.perf_counter()
    for _ in range(100_000):
        IntervalSchedule(30)
    assert time.perf_counter() - start < 1.0


def test_cron_construction_is_cached_and_next_after_is_fast() -> None:
    """10 000 cron schedules of one expression build fast; next_after stays in µs."""
    start = time.perf_counter()
    schedules = [CronSchedule("*/5 * * * *", "Europe/Athens") for _ in range(10_000)]
    assert time.perf_counter() - start < 1.0
    s, t = schedules[0], 1_700_000_000_000
    start = time.perf_counter()
    for _ in range(2_000):
        t = s.next_after(t) or 0
    assert time.perf_counter() - start < 1.0
