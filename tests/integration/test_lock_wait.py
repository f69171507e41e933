"""Waiting for a lock: wake-up on release, first-come first-served, dead and leaving waiters."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
import redis

import cronlock.lock._wait
from cronlock import LockNotAcquired, RedisLock, redis_lock
from cronlock._keys import LockKeys
from cronlock.lock._wait import leave_queue
from cronlock.testing import wait_until

KEYS = LockKeys.of("cronlock", "job")


@pytest.fixture
def no_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiters block up to 30 s between looks: getting the lock sooner proves a wake-up."""
    monkeypatch.setattr(cronlock.lock._wait, "HEARTBEAT", 30.0)


def queued(client: redis.Redis) -> int:
    return int(client.zcard(KEYS.queue))


def start_waiter(
    client: redis.Redis, wait: float, out: list[Any], ttl: float = 30
) -> threading.Thread:
    def run() -> None:
        try:
            lock = RedisLock(client, "job", ttl=ttl, wait=wait).acquire()
            out.append(lock)
        except LockNotAcquired as error:
            out.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_wait_times_out(client: redis.Redis) -> None:
    """A waiter gives up after wait seconds with LockNotAcquired, and leaves the queue."""
    with redis_lock(client, "job", ttl=30), pytest.raises(LockNotAcquired, match=r"within 0\.2 s"):
        redis_lock(client, "job", ttl=5, wait=0.2).acquire()
    assert queued(client) == 0
    assert client.exists(KEYS.queue_expiry) == 0


def test_release_wakes_waiter(client: redis.Redis, no_heartbeat: None) -> None:
    """A blocked waiter gets the lock as soon as the holder releases (not by polling)."""
    holder = RedisLock(client, "job", ttl=30).acquire()
    out: list[Any] = []
    thread = start_waiter(client, wait=20, out=out)
    wait_until(lambda: queued(client) == 1)
    holder.release()
    thread.join(10)  # far below the 30 s heartbeat: only the wake-up can explain it
    assert len(out) == 1
    assert isinstance(out[0], RedisLock)
    assert out[0].fencing_token > holder.fencing_token
    assert queued(client) == 0
    assert client.exists(KEYS.wake(out[0].token)) == 0
    out[0].release()


def test_waiter_wakes_when_lease_ends(client: redis.Redis) -> None:
    """A holder that dies without releasing: the waiter takes over when the lease ends."""
    RedisLock(client, "job", ttl=0.3).acquire()  # never released
    with redis_lock(client, "job", ttl=5, wait=10) as lock:
        assert lock.held


def test_waiters_served_in_arrival_order(client: redis.Redis, no_heartbeat: None) -> None:
    """Three waiters that queued one after another get the lock in that order."""
    holder = RedisLock(client, "job", ttl=30).acquire()
    order: list[int] = []
    threads = []
    for i in range(3):
        lock = RedisLock(client, "job", ttl=30, wait=20)

        def run(lock: RedisLock = lock, i: int = i) -> None:
            lock.acquire()
            order.append(i)
            lock.release()

        threads.append(threading.Thread(target=run, daemon=True))
        threads[-1].start()
        wait_until(lambda i=i: queued(client) == i + 1)
    holder.release()
    for thread in threads:
        thread.join(10)
    assert order == [0, 1, 2]


def test_queue_head_goes_first_even_without_wait(client: redis.Redis) -> None:
    """A free lock with a live waiter at the head is not taken by a newcomer (no barging)."""
    client.zadd(KEYS.queue, {"ghost": 0})
    client.zadd(KEYS.queue_expiry, {"ghost": 2**52})
    with pytest.raises(LockNotAcquired):
        RedisLock(client, "job", ttl=5).acquire()


def test_dead_waiter_is_skipped(client: redis.Redis) -> None:
    """A waiter whose place lapsed (it died) is purged and does not block acquirers."""
    client.zadd(KEYS.queue, {"ghost": 0})
    client.zadd(KEYS.queue_expiry, {"ghost": 1})
    with redis_lock(client, "job", ttl=5) as lock:
        assert lock.held
    assert queued(client) == 0


def test_leaving_waiter_passes_wakeup_on(client: redis.Redis, no_heartbeat: None) -> None:
    """A head waiter that gives up after being woken wakes the next waiter instead."""
    holder = RedisLock(client, "job", ttl=30).acquire()
    client.zadd(KEYS.queue, {"ghost": 0})  # first in line, alive
    client.zadd(KEYS.queue_expiry, {"ghost": 2**52})
    out: list[Any] = []
    thread = start_waiter(client, wait=20, out=out)
    wait_until(lambda: queued(client) == 2)
    holder.release()  # wakes the ghost, which never retries ...
    assert client.llen(KEYS.wake("ghost")) == 1
    leave_queue(client, KEYS, "ghost", 5000)  # ... and gives up
    thread.join(10)
    assert len(out) == 1
    assert isinstance(out[0], RedisLock)
    out[0].release()


def test_short_socket_timeout_client_can_wait(redis_server: Any) -> None:
    """A client with socket_timeout=0.3 waits 1.5 s without redis-py timing out its BLPOP."""
    client = redis_server.client(socket_timeout=0.3)
    client.delete(KEYS.lock, KEYS.queue, KEYS.queue_expiry)
    with redis_lock(client, "job", ttl=30), pytest.raises(LockNotAcquired):
        redis_lock(client, "job", ttl=5, wait=1.5).acquire()


def test_waiters_are_served_fairly(client: redis.Redis) -> None:
    """8 threads competing for one lock: each gets at least half the mean number of turns."""
    counts: Counter[int] = Counter()
    total = 160
    done = threading.Event()
    errors: list[BaseException] = []

    def run(i: int) -> None:
        lock = RedisLock(client, "job", ttl=10, wait=20)
        try:
            while not done.is_set():
                with lock:
                    counts[i] += 1
                    if sum(counts.values()) >= total:
                        done.set()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    mean = sum(counts.values()) / 8
    assert min(counts[i] for i in range(8)) >= 0.5 * mean, counts
