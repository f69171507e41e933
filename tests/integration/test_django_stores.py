"""``settings.CRONLOCK['STORE_URL']`` builds any store through `cronlock.stores.from_url`;
``REDIS_URL`` stays the Redis name (a SQLite file and the session's private Redis)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronlock.django import SettingsError
from cronlock.django._settings import parse_settings
from cronlock.django.apps import make_runner
from cronlock.stores import RedisStore, SqliteStore


def test_store_url_of_a_sqlite_file_makes_a_runner_on_it(tmp_path: Path) -> None:
    """STORE_URL sqlite:///...: the runner's store is that file, STORE_OPTIONS reach it,
    and REDIS_OPTIONS (redis-py arguments) are not passed to it."""
    config = parse_settings(
        {
            "STORE_URL": f"sqlite:///{tmp_path}/jobs.db",
            "STORE_OPTIONS": {"busy_timeout": 1.5},
            "PREFIX": "shop",
        }
    )
    runner = make_runner(config)
    assert isinstance(runner.store, SqliteStore)
    assert runner.store.path == f"{tmp_path}/jobs.db"
    assert runner.prefix == runner.store.prefix == "shop"
    runner.store.ping()
    assert (tmp_path / "jobs.db").is_file()


def test_redis_url_and_store_url_of_redis_make_a_redis_store(redis_url: str) -> None:
    """Either name of a Redis URL gives a RedisStore with REDIS_OPTIONS applied."""
    for key in ("REDIS_URL", "STORE_URL"):
        runner = make_runner(
            parse_settings({key: redis_url, "REDIS_OPTIONS": {"socket_timeout": 3}})
        )
        assert isinstance(runner.store, RedisStore)
        assert runner.store.client.connection_pool.connection_kwargs["socket_timeout"] == 3
        runner.store.ping()


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"REDIS_URL": "sqlite:///x.db"}, "'REDIS_URL' takes a Redis URL (use 'STORE_URL'"),
        ({"STORE_URL": "mysql://u:secret@h/d"}, "unsupported scheme 'mysql' in 'mysql://***@h/d'"),
        ({"STORE_URL": "sqlite:///x.db", "STORE_OPTIONS": 3}, "['STORE_OPTIONS']: must be a dict"),
    ],
)
def test_bad_store_settings_name_the_key(raw: dict[str, Any], named: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    assert named in str(caught.value)
    assert "secret" not in str(caught.value)


def test_a_missing_sqlite_directory_names_the_key_when_the_runner_is_made(tmp_path: Path) -> None:
    """The directory is checked when the store is opened, before any file is written."""
    config = parse_settings({"STORE_URL": f"sqlite:///{tmp_path}/nope/jobs.db"})
    named = r"\['STORE_URL'\]: the SQLite database .* directory '.*/nope' does not exist"
    with pytest.raises(SettingsError, match=named):
        make_runner(config)
    assert list(tmp_path.iterdir()) == []
