"""Helpers for testing code that uses cronlock, against real servers.

* [`RedisServer`][cronlock.testing.RedisServer] starts a private server on a free loopback port (no
  Redis installation needed with the ``embedded`` extra).
* [`FakeClock`][cronlock.clock.FakeClock] and [`OffsetClock`][cronlock.clock.OffsetClock] stand in
  for wall time.
* [`wait_until`][cronlock.testing.wait_until] polls a condition with a deadline, instead of a bare
  sleep.
* [`TcpProxy`][cronlock.testing.TcpProxy] sits between clients and a server and injects network
  faults (delay, partition, reset, a reply lost after its command was applied).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from cronlock.clock import FakeClock, OffsetClock
from cronlock.testing._proxy import TcpProxy
from cronlock.testing._server import RedisServer, find_server_binary, free_port

__all__ = [
    "FakeClock",
    "OffsetClock",
    "RedisServer",
    "TcpProxy",
    "find_server_binary",
    "free_port",
    "wait_until",
]


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01) -> Any:
    """Poll ``predicate`` until it returns something truthy and return that.

    Raises ``AssertionError`` after ``timeout`` seconds, naming the predicate.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate!r}")
        time.sleep(interval)
