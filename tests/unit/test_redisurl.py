"""``valkey://`` and ``valkeys://`` URLs read as ``redis://`` and ``rediss://`` (no server)."""

from __future__ import annotations

import pytest

from cronlock import ConfigurationError, client_from_url
from cronlock._redisurl import masked, redis_url


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("valkey://127.0.0.1:6390", "redis://127.0.0.1:6390"),
        ("valkeys://user:pw@host:6380/2", "rediss://user:pw@host:6380/2"),
        ("VALKEY://h:1/0", "redis://h:1/0"),
        ("redis://h:1/0", "redis://h:1/0"),
        ("rediss://h:1/0", "rediss://h:1/0"),
        ("unix:///tmp/redis.sock?db=1", "unix:///tmp/redis.sock?db=1"),
    ],
)
def test_schemes(given: str, expected: str) -> None:
    """Valkey spellings become redis-py's; the others pass through unchanged."""
    assert redis_url(given) == expected


def test_client_from_url_builds_the_client_redis_py_would() -> None:
    """The valkey:// client has the host, port, db and options of the redis:// one."""
    client = client_from_url("valkeys://u:pw@example.invalid:6380/3", socket_timeout=4)
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("example.invalid", 6380, 3)
    assert (kwargs["username"], kwargs["password"], kwargs["socket_timeout"]) == ("u", "pw", 4)
    assert "SSL" in client.connection_pool.connection_class.__name__


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("http://h:1", "'http://h:1'"),
        ("localhost:6379", "'localhost:6379'"),
        ("memcached://user:secret@h:1", "'memcached://***@h:1'"),
        ("", "''"),
    ],
)
def test_other_schemes_are_refused_naming_the_url(given: str, shown: str) -> None:
    """The error names every accepted scheme and the URL, never its password."""
    with pytest.raises(ConfigurationError) as error:
        redis_url(given)
    message = str(error.value)
    assert message.endswith(f"got {shown}")
    assert "valkey://" in message
    assert "secret" not in message


def test_not_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="got 6379"):
        redis_url(6379)


def test_masked_keeps_urls_without_credentials() -> None:
    assert masked("redis://h:1/0") == "redis://h:1/0"
    assert masked("rediss://:pw@h:1/0") == "rediss://***@h:1/0"
