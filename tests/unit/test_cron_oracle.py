"""CronSchedule against cronsim (an independent implementation of Debian cron's rules).

For every expression of the corpus, in every zone, from two days before each DST
transition of 2023-2026 (or one start in zones without DST), the chain of ``next_after``
must equal cronsim's sequence over the next five days.

Deliberate differences, listed in ``NOT_CRONSIM`` and checked against the definition
("every real minute whose wall time matches") instead:

- Australia/Lord_Howe shifts by 30 minutes. cronsim steps wall-clock hours as 60 real
  minutes for expressions with ``*`` in the minute or hour field, so in that zone it
  skips wall times that do exist (``0 */2`` misses the single 02:00 after the fold;
  ``30 *`` misses the second 01:30 of the fold). cronlock fires at every real instant
  whose wall time matches, as it does in one-hour-shift zones where cronsim agrees.
- Six-field (seconds) expressions with fixed minute and hour: cronsim applies its DST
  fix-ups to 5-field expressions only; cronlock applies the same rules whatever the
  field count, so a seconds field never changes DST behaviour. Only six-field
  expressions with ``*`` in the minute or hour field are compared with cronsim.
"""

from __future__ import annotations

import functools
import random
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from cronlock.schedules import CronSchedule, _cronexpr

CORPUS = [
    "* * * * *",
    "*/5 * * * *",
    "*/15 * * * *",
    "0 * * * *",
    "30 * * * *",
    "15,45 * * * *",
    "0 */2 * * *",
    "0 */3 * * *",
    "*/10 1-3 * * *",
    "* 2 * * *",
    "0 0 * * *",
    "30 1 * * *",
    "0 2 * * *",
    "30 2 * * *",
    "0 3 * * *",
    "45 1 * * *",
    "0,30 2 * * *",
    "15 2,3 * * *",
    "0 1-4 * * *",
    "59 23 * * *",
    "0 0 * * 0",
    "0 9 * * 1-5",
    "30 2 * * SUN",
    "0 2 1 * *",
    "0 0 1 1 *",
    "0 12 */2 * *",
    "0 0 */2 * 1",
    "0 0 1,15 * MON",
    "0 0 29 2 *",
    "0 6 L * *",
    "0 1 * * 5#1",
    "5 4 * * *",
    "0 0-23/2 * * *",
    "*/20 0-3 * * *",
    "0 1 28-31 * *",
    "0 3 * * SUN",
    "30 0 * * 6,0",
    "0 0 1-7 * MON",
]
# Six-field expressions (croniter order: seconds LAST) compared after moving seconds first.
SIX_FIELD = ["*/30 * * * * 0", "* 1 * * * 15", "*/5 2 * * * 30,45"]
ZONES = [
    "UTC",
    "Europe/Athens",
    "Europe/London",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
]
NOT_CRONSIM = {
    ("30 * * * *", "Australia/Lord_Howe"),
    ("0 */3 * * *", "Australia/Lord_Howe"),
    ("0 */2 * * *", "Australia/Lord_Howe"),
    ("* 2 * * *", "Australia/Lord_Howe"),
    ("* 1 * * * 15", "Australia/Lord_Howe"),
    ("*/5 2 * * * 30,45", "Australia/Lord_Howe"),
}
STEPS = 150
SPAN = 5 * 86400


@functools.cache
def _starts(zone: str) -> tuple[int, ...]:
    """Two days before each offset change of 2023-2026 (found by a 30-minute scan)."""
    tz = ZoneInfo(zone)
    t = int(datetime(2023, 1, 1, tzinfo=timezone.utc).timestamp())
    end = int(datetime(2027, 1, 1, tzinfo=timezone.utc).timestamp())
    out, prev = [], datetime.fromtimestamp(t, tz).utcoffset()
    while t < end:
        off = datetime.fromtimestamp(t, tz).utcoffset()
        if off != prev:
            out.append(t - 2 * 86400)
            prev = off
        t += 1800
    return tuple(out) or (int(datetime(2024, 3, 1, tzinfo=timezone.utc).timestamp()),)


def _ours(schedule: CronSchedule, start: int) -> list[int]:
    out, t = [], start * 1000
    for _ in range(STEPS):
        t = schedule.next_after(t)  # type: ignore[assignment]
        out.append(t // 1000)
        if t // 1000 > start + SPAN:
            break
    return out


def _cronsim(expression: str, zone: str, start: int) -> list[int]:
    it = CronSim(expression, datetime.fromtimestamp(start, ZoneInfo(zone)))
    out = []
    for _ in range(STEPS):
        out.append(int(next(it).timestamp()))
        if out[-1] > start + SPAN:
            break
    return out


def _by_definition(expression: str, zone: str, start: int, step: int = 60) -> list[int]:
    """Every real ``step`` after ``start`` whose wall time matches (cronsim in UTC)."""
    tz = ZoneInfo(zone)
    first = datetime.fromtimestamp(start - 2 * 86400, timezone.utc).replace(tzinfo=None)
    naive = CronSim(expression, first.replace(tzinfo=timezone.utc))
    walls = set()
    for moment in naive:
        if moment.replace(tzinfo=None) > first + timedelta(days=10):
            break
        walls.add(moment.replace(tzinfo=None))
    out = []
    t = start - start % step + step
    while len(out) < STEPS and (not out or out[-1] <= start + SPAN):
        if datetime.fromtimestamp(t, tz).replace(tzinfo=None) in walls:
            out.append(t)
        t += step
    return out


def _cases() -> list[object]:
    cases = []
    for expression in CORPUS:
        for zone in ZONES:
            cases.append(pytest.param(expression, zone, id=f"{expression}|{zone}"))
    return cases


@pytest.mark.parametrize(("expression", "zone"), _cases())
def test_next_after_matches_cronsim(expression: str, zone: str) -> None:
    """next_after chains equal cronsim's sequence across every DST transition of 4 years."""
    schedule = CronSchedule(expression, zone)
    oracle = _by_definition if (expression, zone) in NOT_CRONSIM else _cronsim
    for start in _starts(zone):
        assert _ours(schedule, start) == oracle(expression, zone, start), start


def _cronsim_has_seconds() -> bool:
    try:
        CronSim("0 * * * * *", datetime(2024, 1, 1))
    except Exception:  # cronsim < 2.7 (the newest on Python 3.9) rejects a sixth field
        return False
    return True


@pytest.mark.skipif(not _cronsim_has_seconds(), reason="this cronsim has no seconds field")
@pytest.mark.parametrize("expression", SIX_FIELD)
@pytest.mark.parametrize("zone", ZONES)
def test_six_field_expressions_match_cronsim_with_seconds_moved_first(
    expression: str, zone: str
) -> None:
    """A seconds field is the LAST field for cronlock (croniter) and the first for cronsim."""
    fields = expression.split()
    cronsim_expression = " ".join([fields[-1], *fields[:-1]])
    schedule = CronSchedule(expression, zone)
    for start in _starts(zone)[:4]:
        if (expression, zone) in NOT_CRONSIM:
            expected = _by_definition(cronsim_expression, zone, start, step=15)
        else:
            expected = _cronsim(cronsim_expression, zone, start)
        assert _ours(schedule, start) == expected, start


def test_corpus_is_large_enough() -> None:
    """The oracle corpus has at least 30 expressions over several zones."""
    assert len(CORPUS) >= 30
    assert len(ZONES) >= 4


@pytest.mark.parametrize(
    "expression",
    ["*/7 3-5 * * *", "0 0 */2 * 1", "15,45 */3 * 2-11 1-5", "59 23 31 12 *", "*/10 0 1 * * 5,35"],
)
def test_fast_matcher_agrees_with_croniter(expression: str) -> None:
    """The set-based wall-clock matcher gives croniter's answers at random instants."""
    spec = _cronexpr.parse(expression, None)
    assert type(spec) is _cronexpr._FastSpec
    slow = _cronexpr.CronSpec(spec._template, spec.fields, uses_hash=False)
    rnd = random.Random(expression)
    for _ in range(200):
        wall = rnd.randrange(0, 4_102_444_800)
        assert spec.next_naive(wall) == slow.next_naive(wall)
        assert spec.prev_naive(wall) == slow.prev_naive(wall)
