"""``runner.health()``: is this runner able to do its work right now?

Healthy (``ok``) means: Redis answers ``PING``, and the scheduler thread is alive and
has woken within `STALL_AFTER_S` (it wakes at least every 5 s, idle or not).
The operations thread (triggers, dynamic schedules, heartbeat) and dynamic schedules
without a handler are reported as ``warnings``: they do not stop scheduled jobs. So is
an observer that can be probed (the PostgreSQL audit log's `probe()`) and does not
answer: runs go on, and its writes wait in memory.

Meant for liveness/readiness probes: cheap (one PING, bounded by the client's socket
timeout, plus one connection per probed observer, bounded by its connect timeout),
never raises.

Example:
    ```python
    report = runner.health()
    if not report.ok:
        print(report.problems)
    ```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional, Protocol

from cronlock._jsonable import jsonable
from cronlock.clock import monotonic
from cronlock.stores import RedisStore, Store

__all__ = ["STALL_AFTER_S", "Health", "Probed", "Vitals", "check_health", "probe_observers"]

#: A scheduler thread that has not woken for this long is reported stalled: twice its
#: longest sleep (``cronlock.runner.scheduler.MAX_SLEEP_S``, 30 s) plus a margin.
STALL_AFTER_S = 75.0


@dataclass(frozen=True)
class Health:
    """A runner's health at one moment.

    Attributes:
        ok: the store reachable and the scheduler alive and waking.
        redis: the store answered its ping (the older name of ``store``, kept for
            probes written against it; for any store, not only Redis).
        redis_latency_ms: how long it took (None when it failed); = ``store_latency_ms``.
        scheduler_alive: the scheduler thread runs (False before ``start()``).
        scheduler_idle_s: seconds since the scheduler thread last woke (None: never).
        operations_alive: the operations thread runs (triggers, schedules, heartbeat).
        listening: subscribed to the events channel right now.
        last_tick: when the scheduler last processed due slots (None: not yet).
        problems: why ``ok`` is False (empty when it is True).
        warnings: what is wrong but does not stop scheduled jobs.
        store: the store answered its ping (``PING`` on Redis, a query on SQL stores).
        store_latency_ms: how long it took (None when it failed).
        store_kind: which store, e.g. ``RedisStore(prefix='app')``.
        observers: what each observer with a ``probe()`` answered (``name``, ``ok``,
            ``latency_ms``, ``error``): the PostgreSQL audit log's connection.
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
    store: bool = False
    store_latency_ms: Optional[float] = None
    store_kind: str = ""
    observers: tuple[Mapping[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields."""
        return jsonable(self)


@dataclass(frozen=True)
class Vitals:
    """What a runner's threads last recorded, as `check_health` reads it.

    Attributes:
        scheduler_alive: the scheduler thread runs.
        last_wake: [`monotonic()`][cronlock.clock.monotonic] of its last wake-up (None: never).
        operations_alive: the operations thread runs.
        listening: subscribed to the store's events right now.
        unhandled: dynamic schedule id -> task name with no handler in this runner.
        last_tick: when the scheduler last processed due slots (None: not yet).
    """

    scheduler_alive: bool
    last_wake: Optional[float]
    operations_alive: bool
    listening: bool
    unhandled: Mapping[str, str]
    last_tick: Optional[datetime]


class Probed(Protocol):
    """What `check_health` needs of a runner: its store and its vitals."""

    @property
    def store(self) -> Store: ...

    def vitals(self) -> Vitals: ...

    @property
    def observers(self) -> tuple[object, ...]: ...


def check_health(runner: Probed) -> Health:
    """Probe ``runner``: one PING of its store, plus what its threads last recorded."""
    vitals = runner.vitals()
    problems: list[str] = []
    warnings: list[str] = []
    started = monotonic()
    try:
        runner.store.ping()
        redis_ok, latency = True, round((monotonic() - started) * 1000, 3)
    except Exception as error:  # any failure to answer is "unreachable"
        redis_ok, latency = False, None
        what = "Redis" if isinstance(runner.store, RedisStore) else "store"
        problems.append(f"{what} unreachable: {error}")
    alive = vitals.scheduler_alive
    last_wake = vitals.last_wake
    idle = None if last_wake is None else round(monotonic() - last_wake, 3)
    if not alive:
        problems.append("the scheduler thread is not running (start() not called, or stopped)")
    elif idle is not None and idle > STALL_AFTER_S:
        problems.append(f"the scheduler thread has not woken for {idle:.0f} s")
    if alive and not vitals.operations_alive:
        warnings.append("the operations thread is not running")
    elif alive and not vitals.listening:
        warnings.append("not subscribed to the events channel (reconnecting)")
    for sid, task in sorted(vitals.unhandled.items()):
        warnings.append(f"dynamic schedule {sid!r} names task {task!r}, which has no handler here")
    probes = probe_observers(runner.observers)
    for probe in probes:
        if not probe["ok"]:
            warnings.append(
                f"{probe['name']} unreachable ({probe['error']}); runs go on, its writes wait"
            )
    return Health(
        ok=not problems,
        redis=redis_ok,
        redis_latency_ms=latency,
        scheduler_alive=alive,
        scheduler_idle_s=idle,
        operations_alive=vitals.operations_alive,
        listening=vitals.listening,
        last_tick=vitals.last_tick,
        problems=tuple(problems),
        warnings=tuple(warnings),
        store=redis_ok,
        store_latency_ms=latency,
        store_kind=repr(runner.store),
        observers=probes,
    )


def probe_observers(observers: tuple[object, ...]) -> tuple[Mapping[str, Any], ...]:
    """What each observer with a ``probe()`` answers (an object with ``as_dict()``)."""
    out = []
    for observer in observers:
        probe = getattr(observer, "probe", None)
        if not callable(probe):
            continue
        try:
            found = dict(probe().as_dict())
        except Exception as error:  # a probe that raises is a failed probe
            found = {"name": repr(observer), "ok": False, "latency_ms": None, "error": str(error)}
        out.append(found)
    return tuple(out)
