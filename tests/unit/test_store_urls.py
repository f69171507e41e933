"""`cronlock.stores.from_url` and the Redis URL forms behind it, parsed without a server."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from cronlock import ConfigurationError, client_from_url
from cronlock._redisurl import masked, split_cluster_flag
from cronlock.stores import RedisStore, from_url
from cronlock.stores.urls import postgres_dsn, sqlite_path


@pytest.mark.parametrize(
    "url", ["redis://h:1/0", "rediss://h:1/0", "unix:///tmp/r.sock", "valkey://h:1", "valkeys://h"]
)
def test_redis_schemes_build_a_redis_store(url: str) -> None:
    """Every Redis spelling is a RedisStore on a plain redis.Redis, with the prefix given."""
    store = from_url(url, prefix="app", socket_timeout=3)
    assert isinstance(store, RedisStore)
    assert type(store.client) is redis.Redis
    assert store.prefix == "app"
    assert store.client.connection_pool.connection_kwargs["socket_timeout"] == 3


def test_sentinel_url_names_sentinels_service_db_and_master_auth() -> None:
    """redis+sentinel://u:pw@h1:26380,h2/mymaster/2: two sentinels, the master's db and auth."""
    store = from_url("redis+sentinel://u:pw@h1:26380,h2/mymaster/2?socket_timeout=3")
    assert isinstance(store, RedisStore)
    pool = store.client.connection_pool
    assert pool.service_name == "mymaster"
    kwargs = pool.connection_kwargs
    assert (kwargs["db"], kwargs["username"], kwargs["password"]) == (2, "u", "pw")
    assert kwargs["socket_timeout"] == 3
    addresses = [
        (s.connection_pool.connection_kwargs["host"], s.connection_pool.connection_kwargs["port"])
        for s in pool.sentinel_manager.sentinels
    ]
    assert addresses == [("h1", 26380), ("h2", 26379)]
    sentinel_kwargs = pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs
    assert sentinel_kwargs.get("password") is None  # the password is the master's
    assert sentinel_kwargs["socket_timeout"] == 3


def test_sentinel_db_defaults_to_zero() -> None:
    store = from_url("redis+sentinel://[::1]:26379/svc")
    assert isinstance(store, RedisStore)
    assert store.client.connection_pool.connection_kwargs["db"] == 0
    sentinel = store.client.connection_pool.sentinel_manager.sentinels[0]
    assert sentinel.connection_pool.connection_kwargs["host"] == "::1"


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://h1:26379",
        "redis+sentinel://h1:26379/",
        "redis+sentinel:///mymaster",
        "redis+sentinel://h1:26379/mymaster/x",
        "redis+sentinel://h1:26379/mymaster/0/extra",
        "redis+sentinel://h1:notaport/mymaster",
    ],
)
def test_malformed_sentinel_urls_are_refused(url: str) -> None:
    """A Sentinel URL needs HOST[:PORT] and a service name; the message shows the form."""
    with pytest.raises(ConfigurationError, match="Sentinel"):
        from_url(url)


def test_sentinel_error_masks_the_password() -> None:
    with pytest.raises(ConfigurationError) as error:
        from_url("redis+sentinel://u:secret@h1:26379")
    assert "secret" not in str(error.value)
    assert "***@h1:26379" in str(error.value)


@pytest.mark.parametrize(
    ("url", "plain", "flag"),
    [
        ("redis://h:1/0?cluster=true", "redis://h:1/0", True),
        ("redis://h:1?socket_timeout=2&cluster=1", "redis://h:1?socket_timeout=2", True),
        ("redis://h:1?cluster=no&db=0", "redis://h:1?db=0", False),
        ("redis://h:1/0", "redis://h:1/0", None),
        ("redis://h:1/0?db=1", "redis://h:1/0?db=1", None),
    ],
)
def test_cluster_flag_is_read_and_removed(url: str, plain: str, flag: bool | None) -> None:
    """cluster= leaves the URL (redis-py would pass it on to the connection)."""
    assert split_cluster_flag(url) == (plain, flag)


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("redis://h:1?cluster=maybe", "cluster='maybe' must be one of"),
        ("redis://h:1?cluster=1&cluster=0", "given 2 times"),
        ("redis://h:1/3?cluster=1", "only database 0"),
        ("unix:///tmp/r.sock?cluster=1", "over TCP"),
    ],
)
def test_bad_cluster_urls_are_refused_before_connecting(url: str, match: str) -> None:
    """Nothing listens on h:1: these are refused from the URL alone."""
    with pytest.raises(ConfigurationError, match=match):
        from_url(url)


def test_cluster_keyword_of_a_sentinel_url_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="cannot be a Cluster"):
        client_from_url("redis+sentinel://h/svc", cluster=True)


@pytest.mark.parametrize(
    "url",
    ["http://h:1", "mysql://u:secret@h/db", "localhost:6379", "", "sqlite3:///x.db"],
)
def test_unknown_schemes_are_refused_naming_the_url(url: str) -> None:
    """The message lists every scheme and shows the URL with its password masked."""
    with pytest.raises(ConfigurationError) as error:
        from_url(url)
    message = str(error.value)
    assert message.endswith(f"got {masked(url)!r}")
    for scheme in ("redis+sentinel://", "postgresql://", "sqlite://", "valkey://"):
        assert scheme in message
    assert "secret" not in message


def test_not_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="got 6379"):
        from_url(6379)  # type: ignore[arg-type]


def test_bad_prefix_is_refused_before_a_client_is_built() -> None:
    with pytest.raises(ConfigurationError, match="prefix"):
        from_url("redis://h:1?cluster=1", prefix="bad prefix {x}")


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///jobs.db", "jobs.db"),
        ("sqlite:///sub/jobs.db", "sub/jobs.db"),
        ("sqlite:////{tmp}/jobs.db", "/{tmp}/jobs.db"),
        ("sqlite:///my%20jobs.db", "my jobs.db"),
    ],
)
def test_sqlite_paths_follow_sqlalchemy(
    url: str, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three slashes: relative to the working directory; four: absolute."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    tmp = str(tmp_path).lstrip("/")
    assert sqlite_path(url.format(tmp=tmp)) == (path.format(tmp=tmp), {})


def test_sqlite_query_options(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/j.db?busy_timeout=2.5&create_schema=false"
    assert sqlite_path(url) == (f"{tmp_path}/j.db", {"busy_timeout": 2.5, "create_schema": False})


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("sqlite://", "names a file"),
        ("sqlite:///", "names a file"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite://host/jobs.db", "names a file"),
        ("sqlite:///{tmp}/missing/jobs.db", "directory '{tmp}/missing' does not exist"),
        ("sqlite:///{tmp}/j.db?timeout=3", "unknown SQLite URL parameter 'timeout'"),
        ("sqlite:///{tmp}/j.db?busy_timeout=soon", "busy_timeout='soon' must be seconds"),
        ("sqlite:///{tmp}/j.db?create_schema=maybe", "must be true or false"),
    ],
)
def test_bad_sqlite_urls_are_refused_and_no_file_is_made(
    url: str, match: str, tmp_path: Path
) -> None:
    """Refused naming the value; the directory is left as it was (nothing written)."""
    with pytest.raises(ConfigurationError, match=match.format(tmp=tmp_path)):
        from_url(url.format(tmp=tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "dsn", "schema"),
    [
        ("postgresql://app@db/app?schema=jobs", "postgresql://app@db/app", "jobs"),
        ("postgres://u:pw@h:5433/d?sslmode=require&schema=s",
         "postgres://u:pw@h:5433/d?sslmode=require", "s"),
        ("postgresql://app@db/app", "postgresql://app@db/app", None),
        ("postgresql:///app", "postgresql:///app", None),
        ("postgresql://h?dbname=app", "postgresql://h?dbname=app", None),
    ],
)  # fmt: skip
def test_postgres_schema_is_removed_from_the_dsn(url: str, dsn: str, schema: str | None) -> None:
    """schema= is cronlock's, not libpq's: it leaves the DSN and comes back apart."""
    assert postgres_dsn(url) == (dsn, schema)


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("postgresql://u:secret@h", "must name its database"),
        ("postgresql://u:secret@h/", "must name its database"),
        ("postgresql://u:secret@h/d?schema=", "schema= once, non-empty"),
        ("postgresql://u:secret@h/d?schema=a&schema=b", "schema= once, non-empty"),
    ],
)
def test_bad_postgres_urls_are_refused_with_the_password_masked(url: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as error:
        from_url(url)
    assert "secret" not in str(error.value)
    assert "***@h" in str(error.value)
