"""`cronlock demo` end to end: the real entry point, a private server, real replicas."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import procs

pytestmark = pytest.mark.slow


def demo_env(**extra: str) -> dict[str, str]:
    """The environment without any store URL, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if "REDIS_URL" not in k and "STORE_URL" not in k}
    return {**env, **extra}


def demo(
    *args: str, timeout: float = 90, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return procs.run(
        [sys.executable, "-m", "cronlock", "demo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env or demo_env(),
    )


def replica_pids(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` and that run a demo replica."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError):
            ppid = re.search(r"^PPid:\s+(\d+)", status.read_text(), re.M)
            cmdline = (status.parent / "cmdline").read_bytes()
            if ppid and int(ppid.group(1)) == parent and b"_demo_fleet" in cmdline:
                found.append(int(status.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = re.search(r"^State:\s+(\S)", Path(f"/proc/{pid}/status").read_text(), re.M)
    except OSError:
        return False
    return state is not None and state.group(1) != "Z"


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


def test_demo_on_sqlite_runs_without_any_server(tmp_path: Path) -> None:
    """--store sqlite: one file in a new temporary directory, no server started, the kill
    and the takeover as on Redis, exit 0; the directory is gone afterwards."""
    result = demo("--store", "sqlite", "--duration", "22", env=demo_env(TMPDIR=str(tmp_path)))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    made = re.search(r"^created a SQLite file: (\S+) \(no server; removed at the end\)$", out, re.M)
    assert made, out
    assert Path(made.group(1)).parent.parent == tmp_path
    assert not Path(made.group(1)).parent.exists()
    assert "started a private server" not in out
    assert "SIGKILL sent to" in out
    assert re.search(r"long .* 2 +took the slot over", out), out
    assert "duplicates: 0" in out
    assert "result:     OK" in out


def test_the_replicas_stop_when_the_demo_is_killed(tmp_path: Path) -> None:
    """kill -9 of the demo itself: its replicas (in sessions of their own) see their stdin
    close and stop within seconds."""
    proc = procs.spawn(
        [sys.executable, "-m", "cronlock", "demo", "--store", "sqlite", "--duration", "60"],
        stdout=subprocess.PIPE,
        text=True,
        env=demo_env(TMPDIR=str(tmp_path)),
    )
    replicas: list[int] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "replicas ready" in line:
                break
        replicas = replica_pids(proc.pid)
        assert len(replicas) == 3
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in replicas) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in replicas if alive(pid)]
    finally:
        for pid in replicas:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        procs.end(proc)


def test_demo_on_postgresql(pg_server: Any) -> None:
    """--store postgres on the URL of $CRONLOCK_STORE_URL: the kill and the takeover as on
    Redis, exit 0; the run's rows stay for a look afterwards."""
    env = demo_env(CRONLOCK_STORE_URL=pg_server.dsn)
    result = demo("--store", "postgres", "--duration", "22", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    shown = pg_server.dsn.replace("//postgres@", "//***@")  # the user masked, as a password
    assert f"using {shown} (rows under prefix 'cronlock-demo')" in out
    assert "started a private server" not in out
    assert re.search(r"long .* 2 +took the slot over", out), out
    assert "duplicates: 0" in out
    assert "result:     OK" in out
    with pg_server.connect() as conn:
        rows = conn.execute(
            "SELECT count(*) FROM cronlock.history WHERE prefix = 'cronlock-demo' AND key = 'long'"
        ).fetchone()
    assert rows is not None
    assert rows[0] > 0
