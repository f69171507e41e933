"""Locks on every store across real processes: mutual exclusion, kill -9 of the holder,
SIGSTOP past the ttl (loss reported, the successor's token higher)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cronlock import LockNotAcquired
from cronlock.stores import RedisStore, SqliteStore, Store, store_lock
from tests import procs

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
ROUNDS = 10


def url_of(store: Store) -> str:
    """The URL a child process opens the same store with."""
    if isinstance(store, RedisStore):
        kw = store.client.get_connection_kwargs()
        return f"redis://{kw['host']}:{kw['port']}/{kw.get('db', 0)}"
    if isinstance(store, SqliteStore):
        return f"sqlite:///{Path(store.path).resolve()}"
    return str(store.backend.conninfo)  # type: ignore[attr-defined]


def holder(store: Store, key: str, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return procs.spawn(
        [sys.executable, "-m", "tests.lock_holder", url_of(store), store.prefix, key, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        **kwargs,
    )


@pytest.mark.slow
def test_processes_never_overlap(store: Store, tmp_path: Path) -> None:
    """4 processes x 10 read-modify-writes of a file: no lost update, no two holds
    overlap, and fencing tokens increase in the order the holds happened."""
    counter = tmp_path / "counter"
    counter.write_text("0")
    contenders = [
        holder(store, "counter", "contend", str(ROUNDS), str(counter)) for _ in range(PROCESSES)
    ]
    try:
        outputs = [proc.communicate(timeout=120)[0] for proc in contenders]
    finally:
        procs.end_all(contenders)
    assert [proc.returncode for proc in contenders] == [0] * PROCESSES
    assert int(counter.read_text()) == PROCESSES * ROUNDS
    holds = sorted(
        (float(s), float(e), int(f))
        for out in outputs
        for s, e, f in map(str.split, out.split("\n")[:-1])
    )
    assert len(holds) == PROCESSES * ROUNDS
    for (_, end, fence), (start, _, next_fence) in zip(holds, holds[1:]):
        assert end <= start  # one holder at a time
        assert fence < next_fence  # later holds carry higher tokens


def _held_fence(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("held "), line
    return int(line.split()[1])


@pytest.mark.slow
def test_kill_9_of_the_holder_frees_the_lock_after_its_ttl(store: Store) -> None:
    """A holder killed with SIGKILL never releases: the lock stays held until its ttl
    ends, then another process acquires it with a higher token."""
    proc = holder(store, "nightly", "hold", "1.0")
    try:
        fence = _held_fence(proc)
        killed = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with pytest.raises(LockNotAcquired):
            store_lock(store, "nightly", ttl=5).acquire()
        with store_lock(store, "nightly", ttl=5, wait=5) as lock:
            assert time.monotonic() - killed < 1.0 + 1.0  # the ttl, and slack for load
            assert lock.fencing_token > fence
    finally:
        procs.end(proc)


@pytest.mark.slow
def test_a_holder_frozen_past_its_ttl_reports_the_loss(store: Store) -> None:
    """SIGSTOP past the ttl: another process takes the lock with a higher token; the woken
    holder reports ``lost`` and ends its ``with`` in LockLost, and deletes nothing."""
    proc = holder(store, "frozen", "hold", "0.6")
    try:
        fence = _held_fence(proc)
        proc.send_signal(signal.SIGSTOP)
        with store_lock(store, "frozen", ttl=10, wait=5) as successor:
            assert successor.fencing_token > fence
            proc.send_signal(signal.SIGCONT)
            out, _ = proc.communicate(timeout=30)
            assert out.split() == ["lost", "LockLost"]
            assert proc.returncode == 3
            assert successor.held
            with pytest.raises(LockNotAcquired):  # the woken holder's release freed nothing
                store_lock(store, "frozen", ttl=5).acquire()
    finally:
        procs.end(proc)
