"""Check that a Redis (or Valkey) server can keep cronlock's promises.

[`check_server`][cronlock.doctor.check_server] runs a list of read-mostly checks and returns one
[`Check`][cronlock.doctor.Check] per topic, each ``pass``, ``warn`` or ``fail`` with a one-line
explanation. It never raises for what the server says: a command refused by an ACL, an unknown reply
or a dropped connection becomes a ``warn`` or ``fail`` line naming the cause. ``cronlock
doctor`` prints the same list.

| check       | what it looks at                                                                |
|-------------|---------------------------------------------------------------------------------|
| reachable   | ``PING`` answers (nothing else is tried when it does not)                       |
| version     | Redis >= 6.2 or Valkey >= 7.2 (see `MIN_REDIS`); which server it is             |
| eviction    | ``maxmemory-policy``: ``noeviction``/``volatile-*`` pass, ``allkeys-*`` fail    |
| cluster     | standalone, or a cluster in state ``ok`` (its node count is reported)           |
| clock       | this machine's clock against the server's ``TIME``                              |
| persistence | RDB or AOF enabled; without either, a restart forgets done-slot records         |
| scripting   | ``SCRIPT LOAD`` and ``EVALSHA`` of a script that calls ``TIME`` then writes     |
| keys        | a key under ``PREFIX:`` can be written and deleted (ACL key patterns, replicas) |

On a ``RedisCluster`` every primary is checked (each line names its node), and each
node's probe key hashes to a slot that node serves (`cronlock.stores.redis.slots`).
What it does not check: Sentinel topology, replication lag, TLS settings, or whether
other applications share the database.

Example:
    ```python
    from cronlock.doctor import check_server

    for check in check_server(redis.Redis.from_url(url)):
        print(check.status, check.name, check.detail)
    ```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from redis.cluster import RedisCluster
from redis.exceptions import NoPermissionError, RedisError, ResponseError

from cronlock.clock import ClockLike, as_clock, monotonic
from cronlock.stores.redis.slots import probe_key as node_probe_key

__all__ = ["MIN_REDIS", "MIN_VALKEY", "Check", "check_server", "worst_status"]

#: The oldest Redis cronlock supports, and why.
#:
#: * The scripts use ``SET ... GET`` (the lock's fence, ``lock_acquire.lua``) and
#:   ``XTRIM ... MINID`` (history capped by age, ``job_*.lua``), both new in 6.2: an
#:   older server refuses them as syntax errors, so the version check fails below 6.2.
#: * Scripts read ``TIME`` and then write (leases are measured on Redis's clock), which
#:   needs effects replication: the default since 5.0, the only mode since 7.0.
#: * The minimal user is described with ACLs (``ACL SETUSER``, 6.0+), and ``HELLO`` tells
#:   the server and version even to a user without ``INFO`` (6.0+); 6.2 adds ACL channel
#:   permissions (``&pattern``), which the minimal user needs for pub/sub.
#:
#: The suite runs on Redis 7.0 and Valkey 8.1; 6.2 itself is not in CI.
MIN_REDIS = (6, 2)
#: Valkey forked from Redis 7.2.4; every Valkey release is at least that.
MIN_VALKEY = (7, 2)

_ORDER = {"pass": 0, "warn": 1, "fail": 2}

# Reads TIME, then writes and deletes KEYS[1]: the pattern our claim scripts rely on.
_PROBE_SCRIPT = (
    "local t = redis.call('TIME')\n"
    "redis.call('SET', KEYS[1], t[1], 'PX', 10000)\n"
    "redis.call('DEL', KEYS[1])\n"
    "return tonumber(t[1])\n"
)


@dataclass(frozen=True)
class Check:
    """The outcome of one check.

    Attributes:
        name: Short identifier, e.g. ``"eviction"``.
        status: ``"pass"``, ``"warn"`` or ``"fail"``.
        detail: One line for a human: what was seen, and what to do when it is not a pass.
        node: The Cluster node checked (``host:port``), None for a single server.
    """

    name: str
    status: str
    detail: str
    node: Optional[str] = None


def worst_status(checks: list[Check]) -> str:
    """The most severe status in ``checks`` (``"pass"`` for an empty list)."""
    return max((c.status for c in checks), key=_ORDER.__getitem__, default="pass")


def _s(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _denied(error: RedisError, what: str) -> str:
    if isinstance(error, NoPermissionError):
        return f"{what} is not permitted for this user by the server's ACL ({error})"
    return f"{what} failed: {type(error).__name__}: {error}"


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _as_dict(reply: Any) -> dict[str, Any]:
    """A HELLO reply as a ``str``-keyed dict (RESP3 gives a map, RESP2 a flat list)."""
    if isinstance(reply, Mapping):
        return {_s(k): v for k, v in reply.items()}
    if isinstance(reply, (list, tuple)):
        return {_s(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}
    return {}


class _Probe:
    """The facts several checks share, each fetched once."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._info: dict[str, Any] = {}

    def info(self, section: str) -> dict[str, Any]:
        if section not in self._info:
            self._info[section] = {_s(k): v for k, v in self.client.info(section).items()}
        return dict(self._info[section])

    def config(self, name: str) -> str:
        reply = self.client.config_get(name)
        values = {_s(k): _s(v) for k, v in reply.items()}
        if name not in values:
            raise ResponseError(f"CONFIG GET {name} returned nothing")
        return values[name]

    def hello(self) -> dict[str, Any]:
        """Server name, version, mode and role; ``HELLO`` first, ``INFO server`` second."""
        try:
            return {k: _s(v) for k, v in _as_dict(self.client.execute_command("HELLO")).items()}
        except ResponseError:
            info = self.info("server")
            name = "valkey" if "valkey_version" in info else "redis"
            return {
                "server": _s(info.get("server_name", name)),
                "version": _s(info.get("valkey_version", info.get("redis_version", "?"))),
                "mode": _s(info.get("redis_mode", "standalone")),
                "role": "?",
            }


def _check_version(probe: _Probe) -> Check:
    try:
        hello = probe.hello()
    except RedisError as error:
        return Check("version", "warn", _denied(error, "HELLO and INFO server") + "; unknown")
    return _version_verdict(
        hello.get("server", "redis"), hello.get("version", "?"), hello.get("role", "?")
    )


def _version_verdict(server: str, version: str, role: str = "?") -> Check:
    """The ``version`` check for what ``HELLO`` said: pass from the minimum up, else fail."""
    if server.lower() == "valkey":
        label, minimum = "Valkey", MIN_VALKEY
    else:
        label, minimum = "Redis", MIN_REDIS
    text = f"{label} {version} ({role})"
    wanted = ".".join(map(str, minimum))
    if _version_tuple(version) >= minimum:
        return Check("version", "pass", f"{text}; minimum {label} {wanted}")
    return Check(
        "version",
        "fail",
        f"{text} is older than {label} {wanted}: cronlock's scripts use SET ... GET and "
        f"XTRIM ... MINID, which it refuses; upgrade to {label} {wanted} or later",
    )


def _check_eviction(probe: _Probe) -> Check:
    source = ""
    try:
        policy = probe.config("maxmemory-policy")
    except RedisError as config_error:
        try:
            policy = _s(probe.info("memory")["maxmemory_policy"])
        except (RedisError, KeyError):
            return Check(
                "eviction",
                "warn",
                _denied(config_error, "CONFIG GET maxmemory-policy")
                + "; ask an operator to confirm it is noeviction or volatile-*",
            )
        source = " (read from INFO: CONFIG GET is not permitted for this user)"
    if policy == "noeviction":
        return Check("eviction", "pass", f"maxmemory-policy {policy}{source}")
    if policy.startswith("volatile-"):
        return Check(
            "eviction",
            "pass",
            f"maxmemory-policy {policy}{source}: claim state has no TTL and is never evicted; "
            "a held lock's key has one, so keep memory below maxmemory",
        )
    return Check(
        "eviction",
        "fail",
        f"maxmemory-policy {policy}{source} can evict cronlock's claim and lock keys, "
        "so a done slot could run again; use noeviction (or volatile-*)",
    )


def _check_cluster(probe: _Probe) -> Check:
    try:
        mode = probe.hello().get("mode", "standalone")
    except RedisError:
        mode = "?"
    if mode == "standalone":
        return Check("cluster", "pass", "standalone server (not a cluster)")
    if mode == "sentinel":
        return Check(
            "cluster", "fail", "this is a Sentinel, not a data server; connect to the master"
        )
    try:
        raw = probe.client.execute_command("CLUSTER", "INFO")
    except ResponseError as error:
        if "cluster support disabled" in str(error):
            return Check("cluster", "pass", "standalone server (not a cluster)")
        return Check("cluster", "warn", _denied(error, "CLUSTER INFO") + "; cannot count nodes")
    except RedisError as error:
        return Check("cluster", "warn", _denied(error, "CLUSTER INFO"))
    if isinstance(raw, Mapping):
        info = {_s(k): _s(v) for k, v in raw.items()}
    else:
        lines = _s(raw).splitlines()
        info = dict(line.split(":", 1) for line in lines if ":" in line)
    state = info.get("cluster_state", "?").strip()
    nodes = info.get("cluster_known_nodes", "?").strip()
    masters = info.get("cluster_size", "?").strip()
    detail = (
        f"cluster of {nodes} nodes ({masters} masters serving slots), state {state}; "
        "cronlock keys share a hash tag per lock/job"
    )
    return Check("cluster", "pass" if state == "ok" else "fail", detail)


def _check_clock(probe: _Probe, clock: Any, tolerance: float) -> Check:
    try:
        before = clock.time()
        seconds, micros = probe.client.time()
        after = clock.time()
    except RedisError as error:
        return Check("clock", "warn", _denied(error, "TIME") + "; clock offset unknown")
    server = int(seconds) + int(micros) / 1e6
    offset = server - (before + after) / 2
    rtt = max(after - before, 0.0)
    detail = f"this machine is {abs(offset):.3f} s {'behind' if offset > 0 else 'ahead of'} "
    detail += f"the server (round trip {rtt * 1000:.1f} ms, tolerance {tolerance:g} s)"
    if abs(offset) - rtt / 2 > tolerance:
        return Check(
            "clock",
            "warn",
            detail + ": replica clocks decide which slot is due; sync this host with NTP",
        )
    return Check("clock", "pass", detail)


def _check_persistence(probe: _Probe) -> Check:
    save: Optional[str]
    try:
        save = probe.config("save").strip()
        aof = probe.config("appendonly").strip().lower() == "yes"
        source = ""
    except RedisError as config_error:
        try:
            aof = str(probe.info("persistence").get("aof_enabled", "0")) == "1"
        except RedisError:
            return Check(
                "persistence",
                "warn",
                _denied(config_error, "CONFIG GET save/appendonly") + "; persistence unknown",
            )
        save = None
        source = " (CONFIG GET is not permitted for this user; RDB schedule unknown)"
    kinds = [k for k, on in (("RDB", bool(save)), ("AOF", aof)) if on]
    if kinds:
        return Check("persistence", "pass", f"{' and '.join(kinds)} enabled{source}")
    return Check(
        "persistence",
        "warn",
        f"no RDB or AOF{source}: a restart comes back empty and forgets done-slot records, "
        "so a replica with a late clock may run a finished slot again (see docs/guarantees)",
    )


def _check_scripting(probe: _Probe, probe_key: str) -> Check:
    try:
        sha = _s(probe.client.script_load(_PROBE_SCRIPT))
    except RedisError as error:
        return Check(
            "scripting",
            "fail",
            _denied(error, "SCRIPT LOAD") + "; cronlock runs every step as a Lua script",
        )
    try:
        probe.client.evalsha(sha, 1, probe_key)
    except RedisError as error:
        return Check(
            "scripting",
            "fail",
            _denied(error, "EVALSHA of a script that reads TIME and writes a key"),
        )
    return Check("scripting", "pass", "SCRIPT LOAD and EVALSHA work (TIME then write allowed)")


def _check_keys(probe: _Probe, probe_key: str, prefix: str) -> Check:
    try:
        probe.client.set(probe_key, "1", px=10_000, nx=True)
        probe.client.delete(probe_key)
    except RedisError as error:
        return Check(
            "keys",
            "fail",
            _denied(error, f"writing a key under {prefix}:") + f"; grant ~{prefix}:* to this user",
        )
    return Check("keys", "pass", f"keys under {prefix}:* can be written and deleted")


def _guard(name: str, func: Callable[[], Check]) -> Check:
    """Run one check; an unexpected error becomes a ``fail`` line, never a traceback."""
    try:
        return func()
    except (RedisError, OSError, ValueError, TypeError, KeyError) as error:
        return Check(name, "fail", f"unexpected {type(error).__name__}: {error}")


def check_server(
    client: Any,
    *,
    prefix: str = "cronlock",
    clock_tolerance: float = 1.0,
    clock: ClockLike = None,
) -> list[Check]:
    """Check that the server behind ``client`` can keep cronlock's guarantees.

    Args:
        client: A ``redis.Redis`` (``decode_responses`` on or off), or a ``RedisCluster``:
            then each primary is checked in turn, its checks carrying its ``node``.
        prefix: The key prefix the application uses; the ``keys`` check writes and deletes
            one key under it (``PREFIX:doctor:{RANDOM}``, 10 s TTL, on the node's slots).
        clock_tolerance: Seconds this machine's clock may differ from the server's
            ``TIME`` before the ``clock`` check warns.
        clock: The clock to compare (default: the system clock).

    Returns:
        One [`Check`][cronlock.doctor.Check] per topic, in a fixed order. If the server cannot be
        reached, only the ``reachable`` check (a ``fail``) is returned.
    """
    if isinstance(client, RedisCluster):
        cluster: Any = client
        return [
            replace(check, node=node.name)
            for node in cluster.get_primaries()
            for check in check_server(
                cluster.get_redis_connection(node),
                prefix=prefix,
                clock_tolerance=clock_tolerance,
                clock=clock,
            )
        ]
    wall = as_clock(clock)
    started = monotonic()
    try:
        client.ping()
    except (RedisError, OSError) as error:
        return [Check("reachable", "fail", f"PING failed: {type(error).__name__}: {error}")]
    elapsed = (monotonic() - started) * 1000
    probe = _Probe(client)
    probe_key = node_probe_key(client, prefix)
    checks = [Check("reachable", "pass", f"PING answered in {elapsed:.1f} ms")]
    checks.append(_guard("version", lambda: _check_version(probe)))
    checks.append(_guard("eviction", lambda: _check_eviction(probe)))
    checks.append(_guard("cluster", lambda: _check_cluster(probe)))
    checks.append(_guard("clock", lambda: _check_clock(probe, wall, clock_tolerance)))
    checks.append(_guard("persistence", lambda: _check_persistence(probe)))
    checks.append(_guard("scripting", lambda: _check_scripting(probe, probe_key)))
    checks.append(_guard("keys", lambda: _check_keys(probe, probe_key, prefix)))
    return checks
