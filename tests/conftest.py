"""Shared fixtures: private Redis servers on free loopback ports, clients, clocks.

Each pytest run starts its own server (see ``cronlock._server`` for which binary), so
tests can flush, kill, pause and restart it without touching anything else on the
machine. Set ``REDIS_URL`` to also run the ``client`` tests against that server; its
database is flushed before each test, so point it at a database you can spare.

A process a test started (``tests/procs.py``) whose process group is still alive after
the test's teardown is ended and fails the test.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any, Callable

import pytest
import redis

from cronlock._server import RedisServer
from cronlock.clock import FakeClock
from tests import procs


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
        server = RedisServer(**kwargs)
        started.append(server)  # before start(): a failed start is cleaned up too
        return server.start()

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


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port where connections are refused for the whole test.

    The port is bound but not listening: nothing can accept on it, and no other process
    (a parallel worker's server) can take it meanwhile, as it could a port that was free
    a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    """Fail a test that leaves a process group of its own alive, after ending it.

    Autouse, so it is set up before the test's other function-scoped fixtures and torn
    down after them: processes those fixtures end in their teardown do not count."""
    mark = len(procs.started())
    yield
    leaked = procs.alive_since(mark)
    if leaked:
        procs.end_all(leaked, timeout=5)
        pytest.fail(
            "the test left these processes running (ended now): "
            + "; ".join(f"pid {p.pid}: {p.args!r}" for p in leaked),
            pytrace=False,
        )
