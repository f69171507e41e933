"""The lock across real processes: contention, and fork safety."""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

import pytest
import redis

from cronlock import RedisLock, redis_lock
from cronlock._keys import LockKeys
from tests import procs

KEYS = LockKeys.of("cronlock", "counter")
PROCESSES = 6
ROUNDS = 12


def _contend(url: str, worker: int) -> None:
    """One contender: non-atomic read-modify-write of a counter under the lock."""
    client = redis.Redis.from_url(url, socket_timeout=10)
    for _ in range(ROUNDS):
        with redis_lock(client, "counter", ttl=10, wait=60) as lock:
            start = time.monotonic()  # CLOCK_MONOTONIC is system-wide on Linux
            value = int(client.get("counter") or 0)
            time.sleep(0.002)  # widen the window a missing lock would expose
            client.set("counter", value + 1)
            end = time.monotonic()
            client.rpush("holds", f"{start!r} {end!r} {lock.fencing_token} {worker}")
    client.close()


@pytest.mark.slow
def test_processes_never_overlap(redis_url: str) -> None:
    """6 processes x 12 read-modify-writes: no lost update, no overlap, fences increase in order."""
    client = redis.Redis.from_url(redis_url)
    ctx = multiprocessing.get_context("spawn")
    contenders = [ctx.Process(target=_contend, args=(redis_url, i)) for i in range(PROCESSES)]
    try:
        for proc in contenders:
            proc.start()
        for proc in contenders:
            proc.join(120)
    finally:  # none outlives the test, whatever failed
        for proc in contenders:
            if proc.is_alive():
                proc.kill()
            if proc.pid is not None:
                proc.join(10)
    assert [proc.exitcode for proc in contenders] == [0] * PROCESSES
    assert int(client.get("counter") or 0) == PROCESSES * ROUNDS
    holds = sorted(
        (float(s), float(e), int(f), int(w))
        for s, e, f, w in (row.split() for row in client.lrange("holds", 0, -1))
    )
    assert len(holds) == PROCESSES * ROUNDS
    assert len({w for *_, w in holds}) == PROCESSES
    for (_, end, fence, _), (start, _, next_fence, _) in zip(holds, holds[1:]):
        assert end <= start, "two holds overlapped"
        assert next_fence > fence, "fencing tokens not increasing in acquisition order"


def _fork(child: Any) -> int:
    """Run ``child()`` in a forked process; return its exit code (child returns an int)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            code = child()
        finally:
            os._exit(code)
    return procs.reap(pid)


def test_child_does_not_release_parents_lock(redis_server: Any) -> None:
    """A forked child's release() and with-exit do nothing to the parent's lock."""
    client = redis_server.client(socket_timeout=5)
    lock = RedisLock(client, "counter", ttl=30).acquire()

    def child() -> int:
        released = lock.release()
        lock.__exit__(None, None, None)
        return 0 if released is False else 3

    assert _fork(child) == 0
    assert client.get(KEYS.lock) == lock.token.encode()
    assert lock.release() is True


def test_child_renews_its_own_lock(redis_server: Any) -> None:
    """A lock acquired with renew=True in a forked child is renewed in that child."""
    client = redis_server.client(socket_timeout=5)
    with redis_lock(client, "warm-up", ttl=5, renew=True):
        pass  # the parent's renewal thread exists before the fork

    def child() -> int:
        own = redis_server.client(socket_timeout=5)
        lock = RedisLock(own, "counter", ttl=0.3, renew=True).acquire()
        deadline = time.monotonic() + 1.2  # four ttls
        while time.monotonic() < deadline:
            if lock.lost.is_set():
                return 4
            time.sleep(0.05)
        return 0 if lock.release() else 5

    assert _fork(child) == 0
