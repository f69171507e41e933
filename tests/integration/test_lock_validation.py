"""Bad input to the lock API is refused, naming the value, before anything reaches Redis."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis

from cronlock import ConfigurationError, RedisLock, exclusive, inspect, redis_lock


@pytest.fixture
def dead_client(refused_port: int) -> Iterator[redis.Redis]:
    """A client for a port nobody listens on: any command sent would raise ConnectionError."""
    client = redis.Redis(port=refused_port, socket_connect_timeout=0.2)
    yield client
    client.close()


BAD_TTLS = [
    (0, ConfigurationError, "0"),
    (-1, ConfigurationError, "-1"),
    (0.0004, ConfigurationError, "0.0004"),
    (math.nan, ConfigurationError, "nan"),
    (math.inf, ConfigurationError, "inf"),
    (timedelta(seconds=-3), ConfigurationError, "timedelta"),
    ("30", TypeError, "'30'"),
    (None, TypeError, "None"),
    (True, TypeError, "True"),
]


@pytest.mark.parametrize(("ttl", "error", "named"), BAD_TTLS, ids=repr)
def test_bad_ttl(dead_client: redis.Redis, ttl: Any, error: type[Exception], named: str) -> None:
    """ttl must be a positive finite number of seconds (int, float, timedelta; not bool)."""
    with pytest.raises(error, match=named):
        redis_lock(dead_client, "job", ttl=ttl)
    with pytest.raises(error, match=named):
        exclusive("job", ttl=ttl)


BAD_KEYS = [
    ("", ConfigurationError, "''"),
    (None, TypeError, "None"),
    (42, TypeError, "42"),
    ("x" * 257, ConfigurationError, "257"),
    ("a{b}", ConfigurationError, "braces"),
    ("a\nb", ConfigurationError, "control"),
    (" job", ConfigurationError, "' job'"),
]


@pytest.mark.parametrize(("key", "error", "named"), BAD_KEYS, ids=repr)
def test_bad_key(dead_client: redis.Redis, key: Any, error: type[Exception], named: str) -> None:
    """key must be a printable str of 1-256 characters without braces."""
    with pytest.raises(error, match=named):
        redis_lock(dead_client, key, ttl=5)
    with pytest.raises(error, match=named):
        inspect(dead_client, key)
    with pytest.raises(error, match=named):
        exclusive(key, ttl=5)


@pytest.mark.parametrize("wait", [-1, math.nan, "5", True], ids=repr)
def test_bad_wait(dead_client: redis.Redis, wait: Any) -> None:
    """wait must be None or seconds >= 0."""
    with pytest.raises((ConfigurationError, TypeError), match="wait"):
        redis_lock(dead_client, "job", ttl=5, wait=wait)
    lock = RedisLock(dead_client, "job", ttl=5)
    with pytest.raises((ConfigurationError, TypeError), match="wait"):
        lock.acquire(wait=wait)


@pytest.mark.parametrize(
    "client", [None, "redis://localhost", object()], ids=["None", "url", "object"]
)
def test_bad_client(client: Any) -> None:
    """client must be a redis.Redis or RedisCluster; the message names what was given."""
    with pytest.raises(TypeError, match="client must be"):
        redis_lock(client, "job", ttl=5)
    if client is not None:
        with pytest.raises(TypeError, match="client must be"):
            exclusive("job", ttl=5, client=client)


def test_other_bad_options(dead_client: redis.Redis) -> None:
    """on_locked, renew, max_hold, on_lost and prefix are checked too."""
    with pytest.raises(ConfigurationError, match="'ignore'"):
        exclusive("job", ttl=5, on_locked="ignore")
    with pytest.raises(TypeError, match="renew"):
        redis_lock(dead_client, "job", ttl=5, renew="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_hold"):
        redis_lock(dead_client, "job", ttl=5, max_hold=0)
    with pytest.raises(TypeError, match="on_lost"):
        redis_lock(dead_client, "job", ttl=5, on_lost=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="prefix"):
        redis_lock(dead_client, "job", ttl=5, prefix="")
    with pytest.raises(ConfigurationError, match="ttl"):
        RedisLock(dead_client, "job", ttl=5).extend(-2)  # checked before "not held"


def test_nothing_reaches_redis(redis_server: Any) -> None:
    """Refused input sends no command at all: INFO commandstats is unchanged."""
    client = redis_server.client()
    client.config_resetstat()
    for ttl, error, _ in BAD_TTLS:
        with pytest.raises(error):
            redis_lock(client, "job", ttl=ttl)
    for key, error, _ in BAD_KEYS:
        with pytest.raises(error):
            redis_lock(client, key, ttl=5)
    stats = client.info("commandstats")
    assert {name.split("|")[0] for name in stats} <= {"cmdstat_config", "cmdstat_info"}, stats
