"""Checks on user input, run before anything is sent to Redis.

Each check raises [`ConfigurationError`][cronlock.errors.ConfigurationError] (or ``TypeError`` for a
value of the wrong kind altogether) with a message that names the bad value.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster

from cronlock._durations import Seconds, seconds_to_ms
from cronlock.errors import ConfigurationError

__all__ = [
    "MAX_KEY_LENGTH",
    "Seconds",
    "check_client",
    "check_key",
    "check_prefix",
    "seconds_to_ms",
]

MAX_KEY_LENGTH = 256
# Braces would change which part of our key names Redis Cluster hashes (the hash tag),
# so keys of one lock or job could land on different nodes.
_FORBIDDEN_KEY_CHARS = frozenset("{}")


def check_key(key: Any, name: str = "key") -> str:
    """A lock or job key: a non-empty printable string of sane length, without braces."""
    if not isinstance(key, str):
        raise TypeError(f"{name} must be a str; got {key!r}")
    if not key or key.strip() != key or not key.strip():
        raise ConfigurationError(
            f"{name} must be non-empty without leading or trailing spaces; got {key!r}"
        )
    if len(key) > MAX_KEY_LENGTH:
        raise ConfigurationError(
            f"{name} must be at most {MAX_KEY_LENGTH} characters; got {len(key)} "
            f"characters starting {key[:40]!r}"
        )
    if key.isprintable() and "{" not in key and "}" not in key:
        return key  # the common case, without a per-character loop
    bad = sorted({c for c in key if c in _FORBIDDEN_KEY_CHARS or not c.isprintable()})
    if bad:
        raise ConfigurationError(
            f"{name} {key!r} contains {', '.join(repr(c) for c in bad)}: braces and "
            "control characters are not allowed (braces would break Redis Cluster hash tags)"
        )
    return key


def check_prefix(prefix: Any) -> str:
    """The namespace every cronlock key starts with."""
    return check_key(prefix, "prefix")


def check_client(client: Any) -> Any:
    """A redis-py client: ``redis.Redis`` (plain, Sentinel master) or ``RedisCluster``."""
    if isinstance(client, (redis.Redis, RedisCluster)):
        return client
    raise TypeError(
        "client must be a redis.Redis, a Sentinel master client or a redis.cluster.RedisCluster; "
        f"got {client!r}"
    )
