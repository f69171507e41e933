"""Shared fixtures: private Redis servers on free loopback ports, clients, clocks.

Each pytest run starts its own server (see ``cronlock.testing._server`` for which binary), so
tests can flush, kill, pause and restart it without touching anything else on the
machine.

The suite never takes a Redis URL from the environment it runs in: ``REDIS_URL`` and
``CRONLOCK_REDIS_URL`` are removed from ``os.environ`` when this file is loaded, so a
URL exported for your application is neither used nor flushed (tests that exercise
those variables set them themselves, and processes the tests start inherit neither).

To also run the ``client``/``redis_url`` tests against a server of your own, set
``CRONLOCK_TEST_REDIS_URL`` (read once, when this file is loaded). Its database is
flushed before each of those tests, so the suite first checks that it is empty
(``DBSIZE`` 0): a database holding keys the suite did not write is refused, and those
tests are skipped with the reason. Point it at an empty database you can spare.

Two safety nets run around every test:

* a process the test started (``tests/procs.py``) whose process group is still alive
  after the test's teardown is ended and fails the test;
* a ``CronRunner`` still started at the end of a test module is stopped, and fails the
  module's last test; one still started on a ``server_factory`` server when the test
  ends, or on the session's server when the run ends, is stopped before that server is
  and fails too. No runner keeps logging connection errors after its server is gone.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
import redis

from cronlock import runner as runner_module
from cronlock.clock import FakeClock
from cronlock.runner import forks as runner_forks
from cronlock.stores import Store
from cronlock.testing import RedisServer
from tests import procs
from tests.stores import STORE_KINDS, fresh_prefix, postgres_store, redis_store, sqlite_store

#: Read once, at collection; the live environment is never consulted in fixtures.
EXTRA_URL: Optional[str] = os.environ.get("CRONLOCK_TEST_REDIS_URL") or None
for _name in ("REDIS_URL", "CRONLOCK_REDIS_URL"):
    os.environ.pop(_name, None)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under xdist, slow tests run one at a time: they time real processes and servers.

    Two slow tests at once on a 2-core machine can starve each other's replicas past a
    slot (seen: a gunicorn test missing a slot at a load of 7, and a fault scenario's
    owner losing its 1.2 s lease while fresh-venv pip installs ran beside it). So every
    slow test, the packaging ones included, joins one xdist group, which one worker runs
    in order; the other worker takes any fast tests selected with them.
    The tests against ``CRONLOCK_TEST_REDIS_URL`` share one group too: each flushes that
    one database, so two workers would flush each other's keys.
    """
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("redis_url") == "extra":
            # One server of the user's, flushed before each test: one worker at a time.
            item.add_marker(pytest.mark.xdist_group("extra-server"))
            continue
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.xdist_group("slow"))


def _started_runners() -> list[runner_module.CronRunner]:
    return [r for r in runner_forks.tracked() if r.running]


def _stop_runners_of(server: RedisServer) -> list[runner_module.CronRunner]:
    """Stop the started runners whose client talks to ``server``; those runners."""
    found = []
    for r in _started_runners():
        kwargs = getattr(getattr(r.client, "connection_pool", None), "connection_kwargs", {})
        if kwargs.get("port") == server.port and kwargs.get("host") in (server.host, "localhost"):
            r.stop(timeout=5)
            found.append(r)
    return found


def _describe(runners: list[runner_module.CronRunner]) -> str:
    return ", ".join(f"{r!r} jobs={[j.key for j in r.jobs]}" for r in runners)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One private server for the whole run; runners still using it are stopped first."""
    server = RedisServer().start()
    yield server
    left = _stop_runners_of(server)
    server.stop()
    if left:
        pytest.fail(f"runners still started at the end of the run: {_describe(left)}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One private PostgreSQL for the whole run (``tests/pgserver.py``); without its
    binaries or psycopg the tests using it skip, naming why (under ``CI=true`` they fail)."""
    try:
        pytest.importorskip("psycopg", reason="psycopg (the postgres extra) is not installed")
        from tests.pgserver import PostgresServer

        server = PostgresServer()
    except (FileNotFoundError, pytest.skip.Exception) as exc:
        reason = f"no private PostgreSQL for these tests: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " (CI must have one)", pytrace=False)
        pytest.skip(reason)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def server_factory() -> Iterator[Callable[..., RedisServer]]:
    """Start extra private servers (for fault tests); all are stopped after the test,
    after any runner the test left started on them (which fails the test)."""
    started: list[RedisServer] = []

    def make(**kwargs: Any) -> RedisServer:
        server = RedisServer(**kwargs)
        started.append(server)  # before start(): a failed start is cleaned up too
        return server.start()

    yield make
    left = [r for server in started for r in _stop_runners_of(server)]
    for server in started:
        server.stop()
    if left:
        pytest.fail(
            f"runners left started on the test's servers (stopped now): {_describe(left)}",
            pytrace=False,
        )


def _targets() -> list[str]:
    return ["private", "extra"] if EXTRA_URL else ["private"]


@pytest.fixture(scope="session")
def extra_server_refusal() -> Optional[str]:
    """Why ``CRONLOCK_TEST_REDIS_URL`` may not be used, or None once it was found empty.

    Checked once per run, before the suite writes anything there: from then on the
    database holds only what the suite wrote, and it is flushed before each test."""
    assert EXTRA_URL is not None
    with redis.Redis.from_url(EXTRA_URL, socket_timeout=5) as c:
        try:
            keys = c.dbsize()
        except redis.RedisError as exc:
            return f"CRONLOCK_TEST_REDIS_URL={EXTRA_URL} is unusable: {exc}"
    if keys:
        return (
            f"CRONLOCK_TEST_REDIS_URL={EXTRA_URL} holds {keys} keys the suite did not "
            "write; it flushes the database before each test, so it only uses an empty one"
        )
    return None


@pytest.fixture(params=_targets())
def redis_url(request: pytest.FixtureRequest, redis_server: RedisServer) -> str:
    """The URL of a server this test may flush: the private one, and
    CRONLOCK_TEST_REDIS_URL if set (and empty when the run began)."""
    if request.param == "private":
        url = redis_server.url
    else:
        refusal = request.getfixturevalue("extra_server_refusal")
        if refusal:
            pytest.skip(refusal)
        assert EXTRA_URL is not None
        url = EXTRA_URL
    with redis.Redis.from_url(url) as c:
        c.flushdb()
    return url


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def client(request: pytest.FixtureRequest, redis_url: str) -> Iterator[redis.Redis]:
    """A client with ``decode_responses`` off and on: cronlock must work with both."""
    c = redis.Redis.from_url(redis_url, decode_responses=request.param, socket_timeout=5)
    yield c
    c.close()


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each kind (see ``tests/stores.py``); closed after the test."""
    prefix = fresh_prefix()
    made: Store
    if request.param == "redis":
        made = redis_store(request.getfixturevalue("redis_server").url, prefix)
    elif request.param == "postgres":
        made = postgres_store(request.getfixturevalue("pg_server").dsn, prefix)
    else:
        made = sqlite_store(tmp_path, prefix)
    yield made
    close = getattr(made, "close", None)
    if close is not None:
        close()


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


@pytest.fixture(scope="module", autouse=True)
def _no_runner_outlives_its_module() -> Iterator[None]:
    """Stop every CronRunner still started when a test module ends, and fail loudly.

    Module-scoped and autouse: torn down after the module's other fixtures (which may
    legitimately share a started runner across its tests) and before the session's
    server, so a forgotten runner never outlives the server it talks to."""
    yield
    left = _started_runners()
    for r in left:
        r.stop(timeout=5)
    if left:
        pytest.fail(
            f"{len(left)} CronRunner(s) still started at the end of the module (stopped "
            "now); stop every runner a test or fixture starts, in a finally or teardown: "
            + _describe(left),
            pytrace=False,
        )
