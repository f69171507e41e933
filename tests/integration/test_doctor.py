"""check_server() against real private servers, including ACL-restricted users."""

from __future__ import annotations

import uuid
from typing import Callable

import pytest
import redis

from cronlock._scripts import SCRIPTS_DIR
from cronlock.clock import OffsetClock
from cronlock.doctor import MIN_REDIS, Check, check_server, worst_status
from cronlock.stores.redis.doctor import _version_verdict
from cronlock.testing import RedisServer, wait_until
from tests.cluster import cluster_port

NAMES = ["reachable", "version", "eviction", "cluster", "clock", "persistence", "scripting", "keys"]


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def restricted_user(server: RedisServer, *rules: str) -> redis.Redis:
    """A client logged in as a fresh ACL user with ``rules`` on top of full access."""
    name = f"u{uuid.uuid4().hex[:8]}"
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", name, "on", ">pw", "~*", "+@all", *rules)
    admin.close()
    return server.client(username=name, password="pw", socket_timeout=5)


def test_default_private_server_has_no_failure(client: redis.Redis) -> None:
    """A stock private server passes every check except persistence (it keeps nothing)."""
    checks = check_server(client)
    assert [c.name for c in checks] == NAMES
    found = by_name(checks)
    assert worst_status(checks) == "warn"
    assert found["persistence"].status == "warn"
    assert "forgets done-slot records" in found["persistence"].detail
    others = [c for c in checks if c.name != "persistence"]
    assert all(c.status == "pass" for c in others), others


def test_version_names_the_server_and_the_minimum(client: redis.Redis) -> None:
    """The version line says Redis or Valkey, the version, and the minimum."""
    detail = by_name(check_server(client))["version"].detail
    assert detail.startswith(("Redis ", "Valkey "))
    assert "minimum" in detail
    assert MIN_REDIS == (6, 2)


@pytest.mark.parametrize(
    ("server", "version", "status"),
    [
        ("redis", "7.0.15", "pass"),
        ("redis", "6.2.0", "pass"),
        ("redis", "6.0.20", "fail"),  # no SET ... GET, no XTRIM MINID: the scripts fail
        ("redis", "5.0.14", "fail"),
        ("valkey", "8.1.1", "pass"),
        ("valkey", "7.2.4", "pass"),
    ],
)
def test_version_passes_from_the_minimum_the_scripts_need(
    server: str, version: str, status: str
) -> None:
    """Below Redis 6.2 the check fails and says which commands are missing; no warn band."""
    check = _version_verdict(server, version, "master")
    assert check.status == status
    if status == "fail":
        assert "SET ... GET" in check.detail
        assert "upgrade to Redis 6.2" in check.detail


def test_the_scripts_use_what_makes_6_2_the_minimum() -> None:
    """The 6.2-only commands MIN_REDIS is justified by are still in the scripts."""
    scripts = {p.name: p.read_text() for p in SCRIPTS_DIR.glob("*.lua")}
    assert "'PX', px, 'GET')" in scripts["lock_acquire.lua"]
    assert "'XTRIM', KEYS[2], 'MINID'" in scripts["job_claim.lua"]


def test_standalone_server_reports_no_cluster(client: redis.Redis) -> None:
    """A standalone server passes the cluster check and says it is not a cluster."""
    assert "standalone" in by_name(check_server(client))["cluster"].detail


def test_probe_key_is_not_left_behind(client: redis.Redis) -> None:
    """The scripting and keys checks delete what they write."""
    check_server(client, prefix="doctor-test")
    assert list(client.scan_iter(match="doctor-test:*")) == []


@pytest.mark.parametrize(
    ("policy", "status"),
    [("allkeys-lru", "fail"), ("allkeys-random", "fail"), ("volatile-lru", "pass")],
)
def test_eviction_policy(
    server_factory: Callable[..., RedisServer], policy: str, status: str
) -> None:
    """allkeys-* eviction fails (it can evict claim state); volatile-* passes."""
    server = server_factory(extra_args=("--maxmemory-policy", policy))
    check = by_name(check_server(server.client()))["eviction"]
    assert check.status == status
    assert policy in check.detail


def test_aof_counts_as_persistence(server_factory: Callable[..., RedisServer]) -> None:
    """With AOF on, the persistence check passes."""
    server = server_factory(extra_args=("--appendonly", "yes"))
    check = by_name(check_server(server.client()))["persistence"]
    assert check == Check("persistence", "pass", "AOF enabled")


def test_user_without_config_still_gets_the_policy_from_info(
    server_factory: Callable[..., RedisServer],
) -> None:
    """Without CONFIG, the policy is read from INFO and the line says CONFIG was refused."""
    server = server_factory(extra_args=("--maxmemory-policy", "allkeys-lru"))
    checks = by_name(check_server(restricted_user(server, "-config")))
    assert checks["eviction"].status == "fail"
    assert "CONFIG GET is not permitted" in checks["eviction"].detail
    assert checks["persistence"].status == "warn"
    assert "not permitted" in checks["persistence"].detail
    assert checks["scripting"].status == "pass"


def test_user_without_config_info_or_scripts_gets_clear_lines(redis_server: RedisServer) -> None:
    """ACL denials become warn/fail lines naming the ACL, never an exception."""
    checks = by_name(check_server(restricted_user(redis_server, "-config", "-info", "-script")))
    assert checks["reachable"].status == "pass"
    assert checks["version"].status == "pass"  # HELLO is still allowed
    assert checks["eviction"].status == "warn"
    assert "not permitted for this user by the server's ACL" in checks["eviction"].detail
    assert checks["scripting"].status == "fail"
    assert "SCRIPT LOAD is not permitted" in checks["scripting"].detail


def test_user_without_access_to_the_prefix_fails_the_keys_check(
    redis_server: RedisServer,
) -> None:
    """A user whose key pattern excludes the prefix is told which pattern to grant."""
    name = f"u{uuid.uuid4().hex[:8]}"
    redis_server.client().execute_command("ACL", "SETUSER", name, "on", ">pw", "~other:*", "+@all")
    user = redis_server.client(username=name, password="pw")
    checks = by_name(check_server(user, prefix="myapp"))
    assert checks["keys"].status == "fail"
    assert "~myapp:*" in checks["keys"].detail
    assert checks["scripting"].status == "fail"


def test_clock_skew_beyond_tolerance_warns(redis_server: RedisServer) -> None:
    """A machine clock 5 s off Redis TIME warns; a wider tolerance accepts it."""
    c = redis_server.client()
    skewed = by_name(check_server(c, clock=OffsetClock(5.0)))["clock"]
    assert skewed.status == "warn"
    assert "ahead of" in skewed.detail
    assert "NTP" in skewed.detail
    tolerant = by_name(check_server(c, clock=OffsetClock(5.0), clock_tolerance=30))["clock"]
    assert tolerant.status == "pass"


def test_unreachable_server_is_one_failed_line(refused_port: int) -> None:
    """Nothing listening: one failed 'reachable' check and nothing else."""
    c = redis.Redis(port=refused_port, socket_connect_timeout=1)
    checks = check_server(c)
    assert len(checks) == 1
    assert checks[0].name == "reachable"
    assert checks[0].status == "fail"
    assert "ConnectionError" in checks[0].detail


def test_cluster_node_reports_state_and_node_count(
    server_factory: Callable[..., RedisServer],
) -> None:
    """A cluster node without slots fails the cluster check; once it serves all slots, it passes."""
    # The bus port is port + 10000: cluster_port picks a port whose bus port is free too,
    # and the server picks again if either is taken before it binds them.
    server = server_factory(extra_args=("--cluster-enabled", "yes"), port_picker=cluster_port)
    c = server.client()
    down = by_name(check_server(c))["cluster"]
    assert down.status == "fail"
    assert "cluster of 1 nodes" in down.detail
    c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    wait_until(lambda: by_name(check_server(c))["cluster"].status == "pass", 30)
    assert "state ok" in by_name(check_server(c))["cluster"].detail
