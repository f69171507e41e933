"""DST behaviour of CronSchedule, zone by zone: spring gaps and autumn folds.

Each case lists the slots (local wall time with its UTC offset) that follow a start
instant. The rules (see ``cronlock.schedules._cronzone``): a fixed-time job in a gap runs
once at the end of the gap; in a fold once at the first occurrence (``dst_fold="once"``)
or at both (``"both"``); a job with ``*`` in the minute or hour field follows real time.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from cronlock.schedules import CronSchedule


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def _iso(ms: int, zone: str) -> str:
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).isoformat(timespec="minutes")


def _slots(schedule: CronSchedule, start: str, zone: str, count: int) -> list[str]:
    out, t = [], _ms(start)
    for _ in range(count):
        nxt = schedule.next_after(t)
        assert nxt is not None
        out.append(_iso(nxt, zone))
        t = nxt
    return out


CASES = [
    # Europe/Athens: 2024-03-31 03:00 -> 04:00 (gap), 2024-10-27 04:00 -> 03:00 (fold).
    pytest.param(
        "Europe/Athens",
        "30 3 * * *",
        "once",
        "2024-03-30T12:00+02:00",
        ["2024-03-31T04:00+03:00", "2024-04-01T03:30+03:00"],
        id="athens-spring-gap-daily-0330-runs-at-gap-end",
    ),
    pytest.param(
        "Europe/Athens",
        "30 3 * * *",
        "once",
        "2024-10-26T12:00+03:00",
        ["2024-10-27T03:30+03:00", "2024-10-28T03:30+02:00"],
        id="athens-autumn-fold-daily-0330-once",
    ),
    pytest.param(
        "Europe/Athens",
        "30 3 * * *",
        "both",
        "2024-10-26T12:00+03:00",
        ["2024-10-27T03:30+03:00", "2024-10-27T03:30+02:00", "2024-10-28T03:30+02:00"],
        id="athens-autumn-fold-daily-0330-both",
    ),
    pytest.param(
        "Europe/Athens",
        "*/20 * * * *",
        "once",
        "2024-10-27T03:30+03:00",
        [
            "2024-10-27T03:40+03:00",
            "2024-10-27T03:00+02:00",
            "2024-10-27T03:20+02:00",
            "2024-10-27T03:40+02:00",
            "2024-10-27T04:00+02:00",
        ],
        id="athens-autumn-fold-every-20-min-keeps-real-interval",
    ),
    pytest.param(
        "Europe/Athens",
        "*/20 * * * *",
        "once",
        "2024-03-31T02:30+02:00",
        ["2024-03-31T02:40+02:00", "2024-03-31T04:00+03:00", "2024-03-31T04:20+03:00"],
        id="athens-spring-gap-every-20-min-skips-missing-wall-times",
    ),
    # Europe/London: 2024-03-31 01:00 -> 02:00, 2024-10-27 02:00 -> 01:00.
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        "once",
        "2024-03-30T12:00+00:00",
        ["2024-03-31T02:00+01:00", "2024-04-01T01:30+01:00"],
        id="london-spring-gap-daily-0130-runs-at-gap-end",
    ),
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        "once",
        "2024-10-26T12:00+01:00",
        ["2024-10-27T01:30+01:00", "2024-10-28T01:30+00:00"],
        id="london-autumn-fold-daily-0130-once",
    ),
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        "both",
        "2024-10-26T12:00+01:00",
        ["2024-10-27T01:30+01:00", "2024-10-27T01:30+00:00", "2024-10-28T01:30+00:00"],
        id="london-autumn-fold-daily-0130-both",
    ),
    pytest.param(
        "Europe/London",
        "0 * * * *",
        "once",
        "2024-10-27T00:30+01:00",
        ["2024-10-27T01:00+01:00", "2024-10-27T01:00+00:00", "2024-10-27T02:00+00:00"],
        id="london-autumn-fold-hourly-runs-every-real-hour",
    ),
    # America/New_York: 2024-03-10 02:00 -> 03:00, 2024-11-03 02:00 -> 01:00.
    pytest.param(
        "America/New_York",
        "30 2 * * *",
        "once",
        "2024-03-09T12:00-05:00",
        ["2024-03-10T03:00-04:00", "2024-03-11T02:30-04:00"],
        id="new-york-spring-gap-daily-0230-runs-at-gap-end",
    ),
    pytest.param(
        "America/New_York",
        "0,30 2 * * *",
        "once",
        "2024-03-09T12:00-05:00",
        ["2024-03-10T03:00-04:00", "2024-03-11T02:00-04:00"],
        id="new-york-spring-gap-two-times-in-gap-collapse-into-one-run",
    ),
    pytest.param(
        "America/New_York",
        "0 2,3 * * *",
        "once",
        "2024-03-09T12:00-05:00",
        ["2024-03-10T03:00-04:00", "2024-03-11T02:00-04:00"],
        id="new-york-spring-gap-0200-and-0300-run-once-at-0300",
    ),
    pytest.param(
        "America/New_York",
        "30 1 * * *",
        "once",
        "2024-11-02T12:00-04:00",
        ["2024-11-03T01:30-04:00", "2024-11-04T01:30-05:00"],
        id="new-york-autumn-fold-daily-0130-once",
    ),
    pytest.param(
        "America/New_York",
        "30 1 * * *",
        "both",
        "2024-11-02T12:00-04:00",
        ["2024-11-03T01:30-04:00", "2024-11-03T01:30-05:00", "2024-11-04T01:30-05:00"],
        id="new-york-autumn-fold-daily-0130-both",
    ),
    pytest.param(
        "America/New_York",
        "0 */2 * * *",
        "once",
        "2024-03-09T23:30-05:00",
        ["2024-03-10T00:00-05:00", "2024-03-10T04:00-04:00"],
        id="new-york-spring-gap-every-2-hours-skips-missing-0200",
    ),
    pytest.param(
        "America/New_York",
        "*/30 * * * *",
        "once",
        "2024-11-03T00:45-04:00",
        [
            "2024-11-03T01:00-04:00",
            "2024-11-03T01:30-04:00",
            "2024-11-03T01:00-05:00",
            "2024-11-03T01:30-05:00",
            "2024-11-03T02:00-05:00",
        ],
        id="new-york-autumn-fold-every-30-min-keeps-real-interval",
    ),
    # Australia/Lord_Howe (30-minute shift): 2024-04-07 02:00 -> 01:30, 2024-10-06 02:00 -> 02:30.
    pytest.param(
        "Australia/Lord_Howe",
        "15 2 * * *",
        "once",
        "2024-10-05T12:00+10:30",
        ["2024-10-06T02:30+11:00", "2024-10-07T02:15+11:00"],
        id="lord-howe-spring-gap-daily-0215-runs-at-gap-end",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "45 1 * * *",
        "once",
        "2024-04-06T12:00+11:00",
        ["2024-04-07T01:45+11:00", "2024-04-08T01:45+10:30"],
        id="lord-howe-autumn-fold-daily-0145-once",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "45 1 * * *",
        "both",
        "2024-04-06T12:00+11:00",
        ["2024-04-07T01:45+11:00", "2024-04-07T01:45+10:30", "2024-04-08T01:45+10:30"],
        id="lord-howe-autumn-fold-daily-0145-both",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "*/30 * * * *",
        "once",
        "2024-04-07T00:45+11:00",
        [
            "2024-04-07T01:00+11:00",
            "2024-04-07T01:30+11:00",
            "2024-04-07T01:30+10:30",
            "2024-04-07T02:00+10:30",
        ],
        id="lord-howe-autumn-fold-every-30-min-keeps-real-interval",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "0 * * * *",
        "once",
        "2024-10-06T00:30+10:30",
        ["2024-10-06T01:00+10:30", "2024-10-06T03:00+11:00"],
        id="lord-howe-spring-gap-hourly-skips-missing-0200",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "30 * * * *",
        "once",
        "2024-04-07T00:45+11:00",
        ["2024-04-07T01:30+11:00", "2024-04-07T01:30+10:30", "2024-04-07T02:30+10:30"],
        id="lord-howe-autumn-fold-hourly-at-30-runs-at-both-0130s",
    ),
]


@pytest.mark.parametrize(("zone", "expression", "fold", "start", "expected"), CASES)
def test_dst_slots(zone: str, expression: str, fold: str, start: str, expected: list[str]) -> None:
    """The slots after a start instant across a DST transition are exactly the table's."""
    schedule = CronSchedule(expression, zone, dst_fold=fold)
    assert _slots(schedule, start, zone, len(expected)) == expected


@pytest.mark.parametrize(("zone", "expression", "fold", "start", "expected"), CASES)
def test_dst_latest_at_or_before_walks_the_same_slots_backwards(
    zone: str, expression: str, fold: str, start: str, expected: list[str]
) -> None:
    """latest_at_or_before returns each table slot at it and the previous one just before."""
    schedule = CronSchedule(expression, zone, dst_fold=fold)
    slots = [_ms(s) for s in expected]
    for earlier, later in zip(slots, slots[1:]):
        assert schedule.latest_at_or_before(later) == later
        assert schedule.latest_at_or_before(later - 1) == earlier


def test_next_after_from_inside_the_second_occurrence_never_returns_the_past() -> None:
    """From the repeated hour (fold=1), a daily 01:30 job's next slot is the next day."""
    schedule = CronSchedule("30 1 * * *", "America/New_York")
    inside = _ms("2024-11-03T01:15-05:00")  # after 01:30 EDT already happened
    assert _iso(schedule.next_after(inside) or 0, "America/New_York") == "2024-11-04T01:30-05:00"


def test_utc_has_no_dst_cases() -> None:
    """In UTC a daily job runs every 24 h through the dates other zones change clocks."""
    schedule = CronSchedule("30 2 * * *")
    first = _ms("2024-03-30T00:00+00:00")
    slots = _slots(schedule, "2024-03-30T00:00+00:00", "UTC", 3)
    assert slots == ["2024-03-30T02:30+00:00", "2024-03-31T02:30+00:00", "2024-04-01T02:30+00:00"]
    assert first < _ms(slots[0])
