"""``runner.health()``: is this runner able to do its work right now?

Healthy (``ok``) means: Redis answers ``PING``, and the scheduler thread is alive and
has woken within `STALL_AFTER_S` (it wakes at least every 5 s, idle or not).
The operations thread (triggers, dynamic schedules, heartbeat) and dynamic schedules
without a handler are reported as ``warnings``: they do not stop scheduled jobs.

Meant for liveness/readiness probes: cheap (one PING, bounded by the client's socket
timeout), never raises.

Example:
    ```python
    report = runner.health()
    if not report.ok:
        print(report.problems)
    ```
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Optional

from cronlock._jsonable import jsonable

if TYPE_CHECKING:
    from cronlock.runner import CronRunner

__all__ = ["STALL_AFTER_S", "Health", "check_health"]

#: A scheduler thread that has not woken for this long is reported stalled: twice its
#: longest sleep (``cronlock._scheduler.MAX_SLEEP_S``, 30 s) plus a margin.
STALL_AFTER_S = 75.0


@dataclass(frozen=True)
class Health:
    """A runner's health at one moment.

    Attributes:
        ok: Redis reachable and the scheduler alive and waking.
        redis: ``PING`` answered.
        redis_latency_ms: how long it took (None when it failed).
        scheduler_alive: the scheduler thread runs (False before ``start()``).
        scheduler_idle_s: seconds since the scheduler thread last woke (None: never).
        operations_alive: the operations thread runs (triggers, schedules, heartbeat).
        listening: subscribed to the events channel right now.
        last_tick: when the scheduler last processed due slots (None: not yet).
        problems: why ``ok`` is False (empty when it is True).
        warnings: what is wrong but does not stop scheduled jobs.
    """

    ok: bool
    redis: bool
    redis_latency_ms: Optional[float]
    scheduler_alive: bool
    scheduler_idle_s: Optional[float]
    operations_alive: bool
    listening: bool
    last_tick: Optional[datetime]
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields."""
        return jsonable(self)


def check_health(runner: CronRunner) -> Health:
    """Probe ``runner``: one PING, plus what its threads last recorded."""
    problems: list[str] = []
    warnings: list[str] = []
    started = time.monotonic()
    try:
        runner.client.ping()
        redis_ok, latency = True, round((time.monotonic() - started) * 1000, 3)
    except Exception as error:  # any failure to answer is "unreachable"
        redis_ok, latency = False, None
        problems.append(f"Redis unreachable: {error}")
    alive = runner.running
    last_wake = runner._last_wake
    idle = None if last_wake is None else round(time.monotonic() - last_wake, 3)
    if not alive:
        problems.append("the scheduler thread is not running (start() not called, or stopped)")
    elif idle is not None and idle > STALL_AFTER_S:
        problems.append(f"the scheduler thread has not woken for {idle:.0f} s")
    ops = runner._ops
    if alive and not ops.alive:
        warnings.append("the operations thread is not running")
    elif alive and not ops.listening:
        warnings.append("not subscribed to the events channel (reconnecting)")
    for sid, task in sorted(runner.tasks.unhandled.items()):
        warnings.append(f"dynamic schedule {sid!r} names task {task!r}, which has no handler here")
    return Health(
        ok=not problems,
        redis=redis_ok,
        redis_latency_ms=latency,
        scheduler_alive=alive,
        scheduler_idle_s=idle,
        operations_alive=ops.alive,
        listening=ops.listening,
        last_tick=runner.statistics().last_tick,
        problems=tuple(problems),
        warnings=tuple(warnings),
    )
