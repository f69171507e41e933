"""The CLI finds the user's jobs: ``$CRONLOCK_PREFIX``, and a hint naming the prefixes
that do have runners when a command finds nothing under its own. Real replica
processes (``tests/ops_replica.py``) run under another prefix than the CLI's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest
import redis

from cronlock import Admin
from cronlock.testing import RedisServer, wait_until
from tests.integration.test_cli import cli_env, cronlock
from tests.integration.test_cli_ops import Fleet

HINT = "no runners under prefix 'cronlock'; runners found under 'myapp' (use --prefix myapp)"


@pytest.fixture
def server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    return server_factory()


@pytest.fixture
def myapp(server: RedisServer, tmp_path: Path) -> Iterator[Fleet]:
    """Two replicas under prefix ``myapp`` (the README's), with the job ``hourly``."""
    fleet = Fleet(server, tmp_path)
    for _ in range(2):
        fleet.start("--prefix", "myapp", "--job", "hourly:3600:0")
    admin = Admin(redis.Redis.from_url(server.url), "myapp")
    wait_until(lambda: len(admin.runners()) == 2, timeout=15)
    yield fleet
    fleet.stop()


def test_status_under_the_default_prefix_names_the_prefix_with_runners(
    server: RedisServer, myapp: Fleet
) -> None:
    """Two replicas under 'myapp', the CLI on its default: exit 1, and stderr says why."""
    out = cronlock("--redis-url", server.url, "status")
    assert out.returncode == 1
    assert "runners alive:    0" in out.stdout
    assert f"cronlock status: {HINT}" in out.stderr.splitlines()


def test_cronlock_prefix_from_the_environment_and_prefix_option_wins(
    server: RedisServer, myapp: Fleet
) -> None:
    """$CRONLOCK_PREFIX finds the fleet; --prefix given as well beats it."""
    env = cli_env(CRONLOCK_REDIS_URL=server.url, CRONLOCK_PREFIX="myapp")
    out = cronlock("status", env=env)
    assert out.returncode == 0, out.stderr
    assert "runners alive:    2" in out.stdout
    assert out.stderr == ""
    override = cronlock("status", "--prefix", "cronlock", env=env)
    assert override.returncode == 1
    assert HINT in override.stderr


def test_pause_under_cronlock_prefix_reaches_the_fleet(server: RedisServer, myapp: Fleet) -> None:
    """`CRONLOCK_PREFIX=myapp cronlock pause hourly` pauses the job the replicas run."""
    env = cli_env(CRONLOCK_REDIS_URL=server.url, CRONLOCK_PREFIX="myapp")
    out = cronlock("pause", "hourly", env=env)
    assert out.returncode == 0, out.stderr
    assert Admin(redis.Redis.from_url(server.url), "myapp").job("hourly").paused
    assert not Admin(redis.Redis.from_url(server.url), "cronlock").jobs()


@pytest.mark.parametrize(
    "command",
    [
        ("jobs",),
        ("runners",),
        ("history",),
        ("history", "hourly"),
        ("pause", "hourly"),
        ("resume", "hourly"),
        ("pause", "--all"),
        ("trigger", "hourly"),
        ("schedule", "list"),
        ("schedule", "remove", "nope"),
        ("schedule", "add", "reindex", "--interval", "60"),
    ],
    ids=" ".join,
)
def test_every_operator_command_that_finds_nothing_says_where_runners_are(
    server: RedisServer, myapp: Fleet, command: tuple[str, ...]
) -> None:
    """Each command that came up empty under 'cronlock' prints the hint on stderr."""
    refused = command == ("pause", "hourly")  # a key no runner has here: exit 3
    out = cronlock("--redis-url", server.url, *command)
    assert out.returncode in ((3,) if refused else (0, 1)), out.stderr
    assert f"cronlock {command[0]}: {HINT}" in out.stderr.splitlines()
    # With --json the hint stays on stderr: stdout is still one JSON document (or
    # nothing, for trigger's error and pause's refusal).
    as_json = cronlock("--redis-url", server.url, "--json", *command)
    assert HINT in as_json.stderr
    if command[0] == "trigger" or refused:
        assert as_json.stdout == ""
    else:
        json.loads(as_json.stdout)


def test_no_hint_when_the_prefix_has_runners(server: RedisServer, myapp: Fleet) -> None:
    """Under the right prefix an empty answer is just empty: no hint."""
    out = cronlock("--redis-url", server.url, "--prefix", "myapp", "schedule", "list")
    assert out.returncode == 0
    assert "no dynamic schedules" in out.stdout
    assert out.stderr == ""


def test_no_runner_anywhere_says_so_without_a_hint(server: RedisServer) -> None:
    """Nothing runs anywhere: status exits 1 naming its prefix, and names no other."""
    out = cronlock("--redis-url", server.url, "status")
    assert out.returncode == 1
    assert out.stderr.strip() == "cronlock status: no live runner under prefix 'cronlock'"


def test_keys_that_only_look_like_heartbeats_are_not_taken_for_runners(
    server: RedisServer,
) -> None:
    """Another application's ``x:runner:y`` keys do not make a prefix with runners."""
    client = redis.Redis.from_url(server.url)
    client.set("sessions:runner:abc", "not a heartbeat")
    client.set("other:runner:def", json.dumps({"id": "someone-else"}))
    client.hset("hashes:runner:1", "id", "1")
    out = cronlock("--redis-url", server.url, "jobs")
    assert out.returncode == 0
    assert "runners found under" not in out.stderr


def test_a_bad_cronlock_prefix_is_a_usage_error_naming_it(server: RedisServer) -> None:
    """$CRONLOCK_PREFIX with a brace: exit 2, naming the variable and the value."""
    env = cli_env(CRONLOCK_REDIS_URL=server.url, CRONLOCK_PREFIX="my{app}")
    out = cronlock("jobs", env=env)
    assert out.returncode == 2
    assert "$CRONLOCK_PREFIX" in out.stderr
    assert "'my{app}'" in out.stderr
    assert "Traceback" not in out.stderr
