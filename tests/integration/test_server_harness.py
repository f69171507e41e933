"""The private-server harness the whole suite stands on."""

from __future__ import annotations

import socket
from typing import Callable

import pytest
import redis

from cronlock._scripts import all_scripts
from cronlock.testing import RedisServer
from cronlock.testing._server import START_ATTEMPTS, PortInUse


def test_every_script_loads_into_a_real_server(client: redis.Redis) -> None:
    """Every shipped Lua script compiles on the server, and its SHA matches ours."""
    scripts = all_scripts()
    for script in scripts:
        sha = client.script_load(script.source)
        assert (sha.decode() if isinstance(sha, bytes) else sha) == script.sha


def test_restart_keeps_the_port_and_forgets_the_data(server_factory) -> None:  # type: ignore[no-untyped-def]
    """A restarted private server answers on the same port, empty (no persistence)."""
    server: RedisServer = server_factory()
    c = server.client()
    c.set("x", "1")
    server.restart()
    assert c.get("x") is None


def test_killed_server_refuses_connections(server_factory) -> None:  # type: ignore[no-untyped-def]
    """After kill(), a client gets a ConnectionError rather than a hang."""
    server: RedisServer = server_factory()
    c = server.client(socket_timeout=1)
    server.kill()
    with pytest.raises(redis.ConnectionError):
        c.ping()


def _occupy(port: int) -> socket.socket:
    """Listen on ``port`` as another process (a parallel test worker) would."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_picked_port_taken_before_the_server_binds_it_is_picked_again(
    server_factory: Callable[..., RedisServer],
) -> None:
    """The port a server picked is taken before the server binds it (the race between
    parallel workers): the server exits with "Address already in use" and start() tries
    again on a new free port; the other listener is left alone."""
    server = RedisServer()  # no explicit port: it picked one
    picked = server.port
    with _occupy(picked) as other:
        try:
            server.start()
            assert server.port != picked
            assert server.client(socket_timeout=2).ping()
            assert server.url.endswith(f":{server.port}/0")
            with socket.create_connection(("127.0.0.1", picked), timeout=2):
                conn, _ = other.accept()  # the other listener still has its port
                conn.close()
            port = server.port
            server.restart()  # once started, the port is kept
            assert server.port == port
        finally:
            server.stop()


def test_an_explicit_port_that_is_taken_is_an_error_naming_it() -> None:
    """An explicit port is never swapped for another: taken, start() raises PortInUse."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.listen()
        server = RedisServer(port=port)
        try:
            with pytest.raises(PortInUse, match=f"port {port}"):
                server.start()
            assert server.port == port
            assert server.process is not None
            assert server.process.poll() is not None  # nothing left running
        finally:
            server.stop()


def test_a_server_gives_up_after_a_bounded_number_of_taken_ports() -> None:
    """If every picked port is taken, start() stops after START_ATTEMPTS ports."""
    taken = [_occupy(0) for _ in range(START_ATTEMPTS + 1)]
    ports = iter(s.getsockname()[1] for s in taken)
    picks: list[int] = []

    def pick() -> int:
        picks.append(next(ports))
        return picks[-1]

    server = RedisServer(port_picker=pick)
    try:
        with pytest.raises(PortInUse):
            server.start()
        assert len(picks) == START_ATTEMPTS
    finally:
        server.stop()
        for sock in taken:
            sock.close()
