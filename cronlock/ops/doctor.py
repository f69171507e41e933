"""``check_store``: can this store keep cronlock's promises? (what ``cronlock doctor`` runs)

On a [`RedisStore`][cronlock.stores.RedisStore] it runs the Redis server checks of
[`cronlock.doctor`][cronlock.doctor] (every primary of a Cluster). On any other store it
checks what every store has: that it answers, and how far this machine's clock is from
the store's (whose clock measures leases); the server checks are Redis's own and are
reported as not applying, rather than failing.
"""

from __future__ import annotations

from typing import Any

from cronlock.clock import ClockLike, as_clock, monotonic
from cronlock.doctor import Check, check_server
from cronlock.stores import RedisStore, Store

__all__ = ["check_store"]


def check_store(
    store: Store, *, clock_tolerance: float = 1.0, clock: ClockLike = None
) -> list[Check]:
    """One [`Check`][cronlock.doctor.Check] per topic for ``store``; never raises for what
    the store says (an unreachable store is one failed ``reachable`` line)."""
    if isinstance(store, RedisStore):
        return check_server(
            store.client, prefix=store.prefix, clock_tolerance=clock_tolerance, clock=clock
        )
    started = monotonic()
    try:
        store.ping()
    except store.errors as error:
        return [Check("reachable", "fail", f"{type(error).__name__}: {error}")]
    checks = [Check("reachable", "pass", f"answered in {(monotonic() - started) * 1000:.1f} ms")]
    checks.append(_clock(store, as_clock(clock), clock_tolerance))
    checks.append(
        Check(
            "store",
            "pass",
            f"{store!r} is not Redis: the Redis server checks (version, eviction, cluster, "
            "persistence, scripting, keys) do not apply",
        )
    )
    return checks


def _clock(store: Store, wall: Any, tolerance: float) -> Check:
    try:
        before = wall.time()
        server = store.time_ms() / 1000
        after = wall.time()
    except store.errors as error:
        return Check("clock", "warn", f"the store's time is unknown: {error}")
    offset = server - (before + after) / 2
    rtt = max(after - before, 0.0)
    detail = (
        f"this machine is {abs(offset):.3f} s {'behind' if offset > 0 else 'ahead of'} the "
        f"store (round trip {rtt * 1000:.1f} ms, tolerance {tolerance:g} s)"
    )
    if abs(offset) - rtt / 2 > tolerance:
        return Check("clock", "warn", detail + ": sync this host with NTP")
    return Check("clock", "pass", detail)
