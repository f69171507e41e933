"""The schedule library's every(...) DSL, translated into shared, grid-aligned slots."""

from __future__ import annotations

from datetime import datetime, time, timedelta, timezone
from typing import Any

import pytest

from cronlock.errors import ConfigurationError
from cronlock.schedules import CronSchedule, IntervalSchedule, Schedule, UntilSchedule
from cronlock.schedules._every import Every

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc).timestamp()


def every(n: Any = 1) -> Every:
    """An Every whose register callback returns what it was given."""

    def register(schedule: Schedule, fn: Any, args: Any, kwargs: Any, tags: Any) -> Any:
        return schedule, fn, args, kwargs, tags

    return Every(n, register, clock=lambda: NOW)


def job() -> None:
    """A handler."""


@pytest.mark.parametrize(
    ("chain", "expected"),
    [
        (lambda: every(10).seconds, IntervalSchedule(10)),
        (lambda: every().second, IntervalSchedule(1)),
        (lambda: every(10).minutes, IntervalSchedule(600)),
        (lambda: every().minute.at(":30"), IntervalSchedule(60, offset=30)),
        (lambda: every(3).hours, IntervalSchedule(3 * 3600)),
        (lambda: every().hour.at(":15"), IntervalSchedule(3600, offset=900)),
        (lambda: every().hour.at("15:30"), IntervalSchedule(3600, offset=930)),
        (
            lambda: every().hour.at(":15", "Asia/Kolkata"),
            CronSchedule("15 * * * *", "Asia/Kolkata"),
        ),
        (
            lambda: every(2).hours.at(":05", "Europe/Athens"),
            CronSchedule("5 */2 * * *", "Europe/Athens"),
        ),
        (lambda: every().day, IntervalSchedule(86400)),
        (lambda: every().day.at("10:30"), CronSchedule("30 10 * * *")),
        (
            lambda: every().day.at("10:30:15", "Europe/Athens"),
            CronSchedule("30 10 * * * 15", "Europe/Athens"),
        ),
        (lambda: every(2).days, IntervalSchedule(2 * 86400)),
        (lambda: every(2).days.at("06:00"), IntervalSchedule(2 * 86400, offset=6 * 3600)),
        (lambda: every().week, IntervalSchedule(7 * 86400, offset=4 * 86400)),
        (lambda: every().monday, CronSchedule("0 0 * * 1")),
        (
            lambda: every().monday.at("09:00", "Europe/London"),
            CronSchedule("0 9 * * 1", "Europe/London"),
        ),
        (lambda: every().sunday.at("23:59"), CronSchedule("59 23 * * 0")),
        (lambda: every().saturday, CronSchedule("0 0 * * 6")),
    ],
    ids=[
        "10-seconds",
        "second",
        "10-minutes",
        "minute-at-30s",
        "3-hours",
        "hour-at-15",
        "hour-at-15m30s",
        "hour-at-15-kolkata",
        "2-hours-athens",
        "day",
        "day-at-1030",
        "day-at-seconds-athens",
        "2-days",
        "2-days-at-0600",
        "week-is-monday-grid",
        "monday",
        "monday-0900-london",
        "sunday-2359",
        "saturday",
    ],
)
def test_translation_table(chain: Any, expected: Schedule) -> None:
    """Each DSL chain becomes the schedule the module docstring's table promises."""
    assert chain().to_schedule() == expected


def test_every_week_lands_on_mondays_at_midnight_utc() -> None:
    """every().week slots are Mondays 00:00 UTC, not 7 days after process start."""
    slot = every().week.to_schedule().next_after(int(NOW * 1000))
    assert slot is not None
    moment = datetime.fromtimestamp(slot / 1000, timezone.utc)
    assert (moment.weekday(), moment.hour, moment.minute) == (0, 0, 0)


def test_do_registers_schedule_function_arguments_and_tags() -> None:
    """do() hands everything to register and returns its result."""
    schedule, fn, args, kwargs, tags = every(5).minutes.tag("a", "b").do(job, 1, x=2)
    assert schedule == IntervalSchedule(300)
    assert fn is job
    assert args == (1,)
    assert kwargs == {"x": 2}
    assert tags == frozenset({"a", "b"})


@pytest.mark.parametrize(
    ("value", "until_iso"),
    [
        (datetime(2024, 6, 2, tzinfo=timezone.utc), "2024-06-02T00:00:00+00:00"),
        (datetime(2024, 6, 2), "2024-06-02T00:00:00+00:00"),
        (timedelta(hours=1), "2024-06-01T13:00:00+00:00"),
        (time(18, 30), "2024-06-01T18:30:00+00:00"),
        ("2024-06-03 10:00", "2024-06-03T10:00:00+00:00"),
        ("2024-06-03", "2024-06-03T00:00:00+00:00"),
        ("18:00:30", "2024-06-01T18:00:30+00:00"),
    ],
    ids=[
        "aware",
        "naive-is-utc",
        "timedelta",
        "time-today",
        "str-date-time",
        "str-date",
        "str-time",
    ],
)
def test_until_forms(value: Any, until_iso: str) -> None:
    """until() accepts the schedule library's forms; naive values are read as UTC."""
    schedule = every(10).minutes.until(value).to_schedule()
    assert isinstance(schedule, UntilSchedule)
    assert schedule.schedule == IntervalSchedule(600)
    assert schedule == UntilSchedule(IntervalSchedule(600), until_iso)


def test_until_naive_is_read_in_the_at_timezone() -> None:
    """With .at(..., tz), a naive until is wall time in that zone."""
    schedule = every().day.at("10:00", "Europe/Athens").until("2024-07-01 00:00").to_schedule()
    assert isinstance(schedule, UntilSchedule)
    assert schedule == UntilSchedule(
        CronSchedule("0 10 * * *", "Europe/Athens"), "2024-07-01T00:00:00+03:00"
    )


@pytest.mark.parametrize(
    ("chain", "message"),
    [
        (lambda: every(2).monday, "only allowed for weekly jobs"),
        (lambda: every(2).minute, "Use minutes instead of minute"),
        (lambda: every(2).day, "Use days instead of day"),
        (lambda: every(10).seconds.at(":30"), "Invalid unit"),
        (lambda: every().week.at("10:00"), "Invalid unit"),
        (lambda: every().day.at("25:00"), "not between 0 and 23"),
        (lambda: every().day.at("1030"), "daily job"),
        (lambda: every().hour.at("1:30"), "hourly job"),
        (lambda: every().minute.at("30"), "minutely job"),
        (lambda: every(5).to(10), "replicas"),
        (lambda: every().day.at("10:00", "Mars/Olympus"), "Mars/Olympus"),
        (lambda: every(2).days.at("10:00", "Europe/Athens").to_schedule(), "shared grid"),
        (lambda: every(10).to_schedule(), "Invalid unit"),
        (lambda: every().minutes.until("2020-01-01").to_schedule(), "in the past"),
        (lambda: every().minutes.until("soon").to_schedule(), "Invalid string format"),
        (lambda: every(0), "> 0"),
        (lambda: every(float("nan")), "> 0"),
    ],
    ids=[
        "every-2-monday",
        "every-2-minute",
        "every-2-day",
        "at-on-seconds",
        "at-on-weeks",
        "hour-25",
        "bad-daily-format",
        "bad-hourly-format",
        "bad-minutely-format",
        "to-random",
        "unknown-tz",
        "2-days-in-dst-zone",
        "no-unit",
        "until-past",
        "until-bad-string",
        "zero-interval",
        "nan-interval",
    ],
)
def test_invalid_combinations_are_configuration_errors(chain: Any, message: str) -> None:
    """Invalid chains raise ConfigurationError with the schedule library's meaning."""
    with pytest.raises(ConfigurationError, match=message):
        chain()


def test_wrong_types_are_type_errors() -> None:
    """Non-numeric intervals, non-string at(), bad until() and unhashable tags."""
    with pytest.raises(TypeError):
        every("10")
    with pytest.raises(TypeError):
        every().day.at(1030)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        every().day.until(12)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        every().day.tag([1])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        every().day.do("not callable")


def test_do_without_register_is_refused() -> None:
    """An Every not attached to a runner cannot register a job."""
    with pytest.raises(ConfigurationError, match="runner"):
        Every(1).minutes.do(job)
