"""`cronlock demo` end to end: the real entry point, a private server, real replicas."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import procs

pytestmark = pytest.mark.slow


def demo(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return procs.run(
        [sys.executable, "-m", "cronlock", "demo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={k: v for k, v in os.environ.items() if "REDIS_URL" not in k},
    )


def test_demo_kills_a_replica_and_shows_the_takeover() -> None:
    """The default demo kills the long job's owner; another replica runs that slot as attempt 2."""
    result = demo("--duration", "22")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "started a private server" in out
    assert "SIGKILL sent to" in out
    assert "took the slot over" in out
    assert "duplicates: 0" in out
    assert "result:     OK" in out


def test_demo_without_kill_on_two_replicas() -> None:
    """--no-kill --replicas 2 runs, reports no takeover and exits 0."""
    result = demo("--duration", "5", "--replicas", "2", "--no-kill")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 replicas ready" in result.stdout
    assert "takeover:   no kill" in result.stdout


@pytest.mark.parametrize(
    "args", [("--replicas", "0"), ("--duration", "-1")], ids=["replicas", "duration"]
)
def test_demo_refuses_bad_options(args: tuple[str, str]) -> None:
    """Nonsense options exit 2 with a message naming the option."""
    result = demo(*args, timeout=30)
    assert result.returncode == 2
    assert args[0] in result.stderr
