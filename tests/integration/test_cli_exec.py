"""``cronlock exec``: the real entry point running real children under a real lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from cronlock._keys import LockKeys
from cronlock.lock import inspect, redis_lock
from cronlock.testing import RedisServer, wait_until
from tests import procs

# A child that records the first signal it gets, then exits 42.
CHILD = r"""
import pathlib, signal, sys, time
base = pathlib.Path(sys.argv[1])
def on_signal(signum, frame):
    base.with_suffix(".signal").write_text(str(signum))
    sys.exit(42)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, on_signal)
base.with_suffix(".ready").write_text(str(__import__("os").getpid()))
time.sleep(60)
"""


def env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDIS_URL", "CRONLOCK_REDIS_URL", "CRONLOCK_STORE_URL")
    }


def exec_args(url: str, key: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "cronlock", "--redis-url", url, "exec", "--key", key, *options]


def run_exec(
    url: str, key: str, *options: str, command: list[str]
) -> subprocess.CompletedProcess[str]:
    """Run ``cronlock exec`` to completion."""
    return procs.run(
        [*exec_args(url, key, *options), "--", *command],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
        stdin=subprocess.DEVNULL,
    )


def start_child_under_lock(url: str, key: str, tmp_path: Path, *options: str) -> Any:
    """Start ``cronlock exec ... -- python CHILD`` and wait until the child is ready."""
    base = tmp_path / "child"
    proc = procs.spawn(
        [*exec_args(url, key, *options), "--", sys.executable, "-c", CHILD, str(base)],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        wait_until(lambda: base.with_suffix(".ready").exists() or proc.poll() is not None, 30)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    except BaseException:
        procs.end(proc)
        raise
    return proc, base


@pytest.fixture
def key() -> str:
    """A lock key no other test uses."""
    return f"exec-{uuid.uuid4().hex[:10]}"


def test_free_lock_runs_the_command_and_passes_its_status(
    redis_server: RedisServer, key: str
) -> None:
    """The lock is free: the command runs, its exit status is ours, the lock is released."""
    out = run_exec(redis_server.url, key, "--ttl", "10", command=["sh", "-c", "echo ran; exit 3"])
    assert out.returncode == 3, out.stderr
    assert out.stdout == "ran\n"
    assert inspect(redis_server.client(), key) is None


def test_held_lock_exits_75_without_running(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """Another holder: exit 75, the command never runs, the holder keeps its lock."""
    marker = tmp_path / "ran"
    with redis_lock(redis_server.client(), key, ttl=30) as lock:
        out = run_exec(redis_server.url, key, "--ttl", "10", command=["touch", str(marker)])
        assert out.returncode == 75
        assert "held by another owner" in out.stderr
        custom = run_exec(
            redis_server.url, key, "--ttl", "10", "--conflict-exit-code", "0", command=["true"]
        )
        assert custom.returncode == 0
        info = inspect(redis_server.client(), key)
        assert info is not None
        assert info.fencing_token == lock.fencing_token
    assert not marker.exists()


def test_wait_gets_the_lock_once_it_is_released(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """With --wait, the command runs after the holder releases."""
    marker = tmp_path / "ran"
    lock = redis_lock(redis_server.client(), key, ttl=30).acquire()
    with procs.running(
        [
            *exec_args(redis_server.url, key, "--ttl", "10", "--wait", "30"),
            "--",
            "touch",
            str(marker),
        ],
        env=env(),
        stdin=subprocess.DEVNULL,
    ) as proc:
        assert proc.poll() is None
        lock.release()
        assert proc.wait(30) == 0
    assert marker.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_are_forwarded_to_the_child(
    redis_server: RedisServer, key: str, tmp_path: Path, signum: int
) -> None:
    """A signal sent to cronlock reaches the child; cronlock exits with the child's status."""
    proc, base = start_child_under_lock(redis_server.url, key, tmp_path, "--ttl", "10")
    try:
        proc.send_signal(signum)
        assert proc.wait(30) == 42
    finally:
        procs.end(proc)  # cronlock and the child it started
    assert base.with_suffix(".signal").read_text() == str(int(signum))
    assert inspect(redis_server.client(), key) is None


def test_child_killed_by_a_signal_gives_128_plus_n(redis_server: RedisServer, key: str) -> None:
    """A child killed by SIGKILL makes cronlock exit 137, like a shell."""
    out = run_exec(redis_server.url, key, "--ttl", "10", command=["sh", "-c", "kill -KILL $$"])
    assert out.returncode == 128 + signal.SIGKILL
    assert inspect(redis_server.client(), key) is None


def test_lost_lock_terminates_the_child_and_exits_76(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """When the lock key disappears under it, the child gets SIGTERM and cronlock exits 76."""
    proc, base = start_child_under_lock(redis_server.url, key, tmp_path, "--ttl", "2")
    try:
        redis_server.client().delete(LockKeys.of("cronlock", key).lock)
        assert proc.wait(30) == 76
    finally:
        procs.end(proc)  # cronlock and the child it started
    assert base.with_suffix(".signal").read_text() == str(int(signal.SIGTERM))
    assert proc.stderr is not None
    assert "was lost" in proc.stderr.read()


def test_unreachable_redis_exits_69_without_running(
    tmp_path: Path, key: str, refused_port: int
) -> None:
    """Fail closed: no Redis, no run, exit 69."""
    marker = tmp_path / "ran"
    out = run_exec(
        f"redis://127.0.0.1:{refused_port}/0", key, "--ttl", "5", command=["touch", str(marker)]
    )
    assert out.returncode == 69
    assert not marker.exists()
    assert "Traceback" not in out.stderr


def test_missing_command_is_127_and_usage_errors_are_2(redis_server: RedisServer, key: str) -> None:
    """An unknown command exits 127; no command or a bad ttl exits 2."""
    missing = run_exec(redis_server.url, key, "--ttl", "5", command=["no-such-cmd-xyz"])
    assert missing.returncode == 127
    assert "command not found" in missing.stderr
    assert run_exec(redis_server.url, key, "--ttl", "5", command=[]).returncode == 2
    assert run_exec(redis_server.url, key, "--ttl", "-1", command=["true"]).returncode == 2
    assert run_exec(redis_server.url, "bad{key}", "--ttl", "5", command=["true"]).returncode == 2


def test_lock_is_held_while_the_command_runs(
    redis_server: RedisServer, key: str, tmp_path: Path
) -> None:
    """While the child runs, ``inspect`` shows the lock held by the cronlock process."""
    proc, _ = start_child_under_lock(redis_server.url, key, tmp_path, "--ttl", "10")
    try:
        info = inspect(redis_server.client(), key)
        assert info is not None
        assert info.holder is not None
        assert info.holder.endswith(f":{proc.pid}")
    finally:
        procs.end(proc)
