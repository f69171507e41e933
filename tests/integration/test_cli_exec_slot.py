"""``cronlock exec --slot``: once per occurrence across hosts, with real processes."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from cronlock._keys import LockKeys, exec_slot_key
from cronlock.cli._exec_slot import RECORD_MS, SlotClaim, plan_of
from cronlock.lock import redis_lock
from cronlock.testing import RedisServer, wait_until
from tests import procs
from tests.integration.test_cli_exec import CHILD, env, exec_args, run_exec

# Appends the occurrence it was started for: one line per run of the command.
RECORD = 'echo "$CRONLOCK_SLOT" >> "$0"'


@pytest.fixture
def key() -> str:
    """A lock key no other test uses."""
    return f"slot-{uuid.uuid4().hex[:10]}"


def spawn_exec(url: str, key: str, runs: Path, *options: str) -> subprocess.Popen[str]:
    """Start ``cronlock exec KEY OPTIONS -- sh -c RECORD runs`` (a fast command)."""
    return procs.spawn(
        [*exec_args(url, key, "--ttl", "10", *options), "--", "sh", "-c", RECORD, str(runs)],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Wait for a process started by `spawn_exec`; its status and stderr."""
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        procs.end(proc)
    return proc.returncode, err


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def iso_minute(now: float) -> str:
    minute = datetime.fromtimestamp(now - now % 60, tz=timezone.utc)
    return minute.isoformat().replace("+00:00", "Z")


def start_of_a_quiet_minute() -> None:
    """Return with at least 15 s left in the current minute (waiting for the next one)."""
    if 60 - time.time() % 60 < 15:
        wait_until(lambda: time.time() % 60 < 45, timeout=20, interval=0.1)


def two_hosts_1_5_s_apart(url: str, key: str, runs: Path, *options: str) -> list[tuple[int, str]]:
    """Start the same fast command on two "hosts" 1.5 s apart; both statuses and stderrs."""
    start_of_a_quiet_minute()
    started = time.monotonic()
    first = spawn_exec(url, key, runs, *options)
    result = [finish(first)]  # a fast command: done, the lock free again, before the second
    wait_until(lambda: time.monotonic() - started >= 1.5, timeout=5)
    result.append(finish(spawn_exec(url, key, runs, *options)))
    return result


@pytest.mark.slow
def test_two_hosts_1_5_s_apart_run_the_occurrence_once(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """Same crontab line, same minute, 1.5 s apart: one runs it, the other exits 75."""
    runs = tmp_path / "runs"
    (first, _), (second, err) = two_hosts_1_5_s_apart(
        redis_server.url, key, runs, "--slot", "* * * * *", "--timezone", "UTC"
    )
    assert (first, second) == (0, 75), err
    assert "already claimed" in err
    assert lines(runs) == [iso_minute(time.time())]


@pytest.mark.slow
def test_without_slot_both_hosts_run_the_fast_command(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """The plain mutex is unchanged: a fast command finished, so the second host runs it too."""
    runs = tmp_path / "runs"
    results = two_hosts_1_5_s_apart(redis_server.url, key, runs)
    assert [code for code, _ in results] == [0, 0]
    assert lines(runs) == []  # no CRONLOCK_SLOT without --slot: two empty lines
    assert runs.read_text() == "\n\n"


@pytest.mark.slow
def test_every_occurrence_runs_once(redis_server: RedisServer, key: str, tmp_path: Path) -> None:
    """Every 2 s, hosts starting every 0.5 s for 5 s: no occurrence runs twice; the next runs."""
    runs = tmp_path / "runs"
    started: list[subprocess.Popen[str]] = []
    try:
        for _ in range(10):
            started.append(spawn_exec(redis_server.url, key, runs, "--slot", "* * * * * */2"))
            time.sleep(0.5)  # the gap between crontab firings is the scenario
        results = [finish(proc) for proc in started]
    finally:
        procs.end_all(started)
    ran = lines(runs)
    assert len(ran) == len(set(ran)), ran  # no occurrence twice
    assert len(ran) >= 2, ran  # the next occurrence ran again
    assert sum(code == 0 for code, _ in results) == len(ran)
    assert all(code in (0, 75) for code, _ in results), results
    assert all(datetime.fromisoformat(t.replace("Z", "+00:00")).second % 2 == 0 for t in ran)


def test_a_run_lasting_past_the_next_occurrence_still_excludes(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """A long run holds the lock: the next occurrence's host finds it held and exits 75."""
    base = tmp_path / "child"
    slot = ("--slot", "* * * * * */2")
    child = [sys.executable, "-c", CHILD, str(base)]
    proc = procs.spawn(
        [*exec_args(redis_server.url, key, "--ttl", "10", *slot), "--", *child],
        stdin=subprocess.DEVNULL,
        env=env(),
    )
    try:
        wait_until(lambda: base.with_suffix(".ready").exists() or proc.poll() is not None, 30)
        assert proc.poll() is None
        claimed = redis_server.client().get(exec_slot_key("cronlock", key))
        assert claimed is not None
        # The next occurrence (2 s later) is due: a second host tries it.
        wait_until(lambda: time.time() * 1000 >= int(claimed) + 2000, timeout=5)
        marker = tmp_path / "ran"
        out = run_exec(redis_server.url, key, "--ttl", "10", *slot, command=["touch", str(marker)])
        assert out.returncode == 75
        assert "held by another owner" in out.stderr
        assert not marker.exists()
    finally:
        procs.end(proc)


def test_a_late_firing_does_not_run(redis_server: RedisServer, key: str, tmp_path: Path) -> None:
    """An occurrence older than --slot-grace is not run (exit 75), and nothing is written."""
    marker = tmp_path / "ran"
    out = run_exec(
        redis_server.url,
        key,
        "--ttl",
        "10",
        *("--slot", "0 0 1 1 *", "--timezone", "UTC", "--slot-grace", "5"),
        command=["touch", str(marker)],
    )
    assert out.returncode == 75, out.stderr
    assert "beyond --slot-grace 5 s" in out.stderr
    assert not marker.exists()
    assert redis_server.client().keys(f"*{key}*") == []


def test_a_later_claimed_occurrence_refuses_an_older_one(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """A host whose clock runs late finds a later occurrence claimed: exit 75, record kept."""
    client = redis_server.client()
    later = int(time.time() * 1000) + 86_400_000
    client.set(exec_slot_key("cronlock", key), later)
    marker = tmp_path / "ran"
    out = run_exec(
        redis_server.url, key, "--ttl", "10", "--slot", "* * * * *", command=["touch", str(marker)]
    )
    assert out.returncode == 75
    assert "a later occurrence" in out.stderr
    assert not marker.exists()
    assert int(client.get(exec_slot_key("cronlock", key))) == later
    assert client.exists(LockKeys.of("cronlock", key).lock) == 0  # released


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (("--slot", "bogus"), "'bogus'"),
        (("--slot", "61 * * * *"), "'61 * * * *'"),
        (("--slot", "* * * * *", "--slot-grace", "-1"), "-1"),
        (("--slot", "* * * * *", "--timezone", "Mars/Base"), "'Mars/Base'"),
        (("--slot-grace", "5"), "--slot-grace"),
    ],
)
def test_bad_slot_options_exit_2_before_anything_is_written(
    redis_server: RedisServer, key: str, tmp_path: Path, options: tuple[str, ...], named: str
) -> None:
    """A bad --slot, --slot-grace or --timezone exits 2 naming it; nothing is sent to Redis."""
    marker = tmp_path / "ran"
    out = run_exec(redis_server.url, key, "--ttl", "10", *options, command=["touch", str(marker)])
    assert out.returncode == 2, out.stderr
    assert named in out.stderr
    assert not marker.exists()
    assert redis_server.client().keys(f"*{key}*") == []


def test_the_claim_script_claims_each_occurrence_once(client: redis.Redis, key: str) -> None:
    """Claims succeed only for a newer occurrence, by the lock's holder; the record expires."""
    args = argparse.Namespace(
        key=key, prefix="cronlock", slot="* * * * *", slot_grace=60.0, timezone="UTC"
    )
    record = exec_slot_key("cronlock", key)

    def plan_at(ms: int) -> Any:
        return plan_of(args, ms)

    t = 1_700_000_040_000  # a minute boundary
    with redis_lock(client, key, ttl=10) as lock:
        assert plan_at(t).claim(client, lock.token) == (SlotClaim.CLAIMED, "")
        assert plan_at(t + 30_000).claim(client, lock.token) == (SlotClaim.DONE, str(t))
        assert plan_at(t - 60_000).claim(client, lock.token) == (SlotClaim.STALE, str(t))
        assert plan_at(t + 60_000).claim(client, lock.token) == (SlotClaim.CLAIMED, str(t))
        assert plan_at(t + 120_000).claim(client, "not-the-token") == (SlotClaim.LOST, "")
        assert int(client.get(record)) == t + 60_000
        assert 0 < client.pttl(record) <= 60_000 + RECORD_MS
        client.set(record, "garbage")
        assert plan_at(t + 120_000).claim(client, lock.token) == (SlotClaim.CORRUPT, "garbage")
    assert plan_at(t).refusal(SlotClaim.CLAIMED, "") is None


def test_a_record_cronlock_did_not_write_is_an_error(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """A foreign value in the slot record exits 1 naming the key, even with conflict code 0."""
    client = redis_server.client()
    client.set(exec_slot_key("cronlock", key), "not-a-number")
    marker = tmp_path / "ran"
    out = run_exec(
        redis_server.url,
        key,
        *("--ttl", "10", "--slot", "* * * * *", "--conflict-exit-code", "0"),
        command=["touch", str(marker)],
    )
    assert out.returncode == 1, out.stderr
    assert f"cronlock:slot:{{{key}}}" in out.stderr
    assert not marker.exists()
