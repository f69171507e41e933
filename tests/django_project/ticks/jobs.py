"""The test project's jobs, found by cronlock.django's autodiscovery (like admin.py).

``DT_JOBS`` jobs record their runs; the others are declared with each registration call
and only need to be registered (their slots lie hours away).
"""

from __future__ import annotations

import os
from typing import Callable

from django.contrib.auth.models import User
from django.db import connections
from ticks.record import log

from cronlock import JobContext
from cronlock.django import runner
from cronlock.schedules import IntervalSchedule

#: What ``db-touch`` saw: the thread's connection wrapper, and whether it was open at start.
SEEN: list[dict[str, object]] = []


def make_handler(name: str, duration: float) -> Callable[[JobContext], None]:
    def handler(ctx: JobContext) -> None:
        log(event="start", job=name, slot=ctx.slot_ms, attempt=ctx.attempt)
        cancelled = ctx.cancelled.wait(duration)
        outcome = "cancelled" if cancelled else "done"
        log(event="end", job=name, slot=ctx.slot_ms, attempt=ctx.attempt, outcome=outcome)
        ctx.check()

    return handler


for spec in filter(None, os.environ.get("DT_JOBS", "").split(",")):
    name, interval, duration, ttl = spec.split(":")
    runner.add_job(
        make_handler(name, float(duration)),
        IntervalSchedule(float(interval)),
        key=name,
        ttl=float(ttl),
        catch_up=1.0,
    )


@runner.cron("0 4 * * *", key="nightly")
def nightly(ctx: JobContext) -> None:
    """A cron job (04:00 in settings.CRONLOCK['TIMEZONE'])."""


@runner.interval(hours=1, key="db-touch")
def db_touch() -> None:
    """Uses the ORM from the runner's thread; notes the connection's state."""
    SEEN.append(
        {
            "wrapper": connections["default"],
            "open_at_start": connections["default"].connection is not None,
        }
    )
    User.objects.count()
    SEEN[-1]["open_after_query"] = connections["default"].connection is not None


def weekly_report() -> None:
    """Registered through the schedule DSL."""


runner.every().monday.at("06:00").do(weekly_report)
