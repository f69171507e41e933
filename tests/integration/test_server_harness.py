"""The private-server harness the whole suite stands on."""

from __future__ import annotations

import pytest
import redis

from cronlock._scripts import all_scripts
from cronlock.testing import RedisServer


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
