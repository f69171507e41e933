"""Shared fixtures: private Redis servers on free loopback ports, clients, clocks.

Each pytest run starts its own server (see ``cronlock.testing._server`` for which binary), so
tests can flush, kill, pause and restart it without touching anything else on the
machine. Set ``REDIS_URL`` to also run the ``client`` tests against that server; its
database is flushed before each test, so point it at a database you can spare.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Callable

import pytest
import redis

from cronlock.clock import FakeClock
from cronlock.testing import RedisServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One private server for the whole run."""
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def server_factory() -> Iterator[Callable[..., RedisServer]]:
    """Start extra private servers (for fault tests); all are stopped after the test."""
    started: list[RedisServer] = []

    def make(**kwargs: Any) -> RedisServer:
        server = RedisServer(**kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def _targets() -> list[str]:
    return ["private", "env"] if os.environ.get("REDIS_URL") else ["private"]


@pytest.fixture(params=_targets())
def redis_url(request: pytest.FixtureRequest, redis_server: RedisServer) -> str:
    """The URL of a server this test may flush: the private one, and REDIS_URL if set."""
    url = redis_server.url if request.param == "private" else os.environ["REDIS_URL"]
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def client(request: pytest.FixtureRequest, redis_url: str) -> Iterator[redis.Redis]:
    """A client with ``decode_responses`` off and on: cronlock must work with both."""
    c = redis.Redis.from_url(redis_url, decode_responses=request.param, socket_timeout=5)
    yield c
    c.close()


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock that moves only when the test says so."""
    return FakeClock(1_700_000_000.0)
