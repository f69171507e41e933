"""The lock primitive against a real server: acquire, release, fencing, loss, faults."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cronlock import LockInfo, LockLost, LockNotAcquired, RedisLock, inspect, redis_lock
from cronlock._keys import LockKeys
from cronlock.lock._holds import HOLDS
from cronlock.lock.renewer import get_renewer
from cronlock.testing import wait_until

KEYS = LockKeys.of("cronlock", "job")


def stored(client: redis.Redis, key: str) -> Any:
    value = client.get(key)
    return value.decode() if isinstance(value, bytes) else value


def test_acquire_release_round_trip(client: redis.Redis) -> None:
    """A held lock stores our token with the ttl as PX, and release deletes it."""
    with redis_lock(client, "job", ttl=2.5) as lock:
        assert stored(client, KEYS.lock) == lock.token
        assert 2000 < client.pttl(KEYS.lock) <= 2500
        assert lock.held
        assert 0 < lock.remaining() <= 2.5
        assert lock.fencing_token > 0
    assert client.exists(KEYS.lock) == 0
    assert not lock.held
    assert lock.remaining() == 0.0


def test_held_lock_refuses_at_once(client: redis.Redis) -> None:
    """Without wait, a second acquirer gets LockNotAcquired naming the key."""
    with redis_lock(client, "job", ttl=5), pytest.raises(LockNotAcquired, match="'job'"):
        redis_lock(client, "job", ttl=5).acquire()


def test_fencing_tokens_strictly_increase(client: redis.Redis) -> None:
    """Each acquire of a key gets a larger fencing token, even after the stored fence expired."""
    tokens = []
    for i in range(20):
        if i == 10:
            client.delete(KEYS.fence)  # what expiry of the stored fence looks like
        with redis_lock(client, "job", ttl=1) as lock:
            tokens.append(lock.fencing_token)
    assert tokens == sorted(set(tokens))


def test_fence_memory_is_bounded(client: redis.Redis) -> None:
    """After release only the fence key remains, expiring 60 s after the lock would have."""
    with redis_lock(client, "job", ttl=3):
        assert 60_000 < client.pttl(KEYS.fence) <= 63_000
    assert sorted(stored_keys(client)) == [KEYS.fence]


def test_fence_above_redis_time_still_increases(client: redis.Redis) -> None:
    """A stored fence ahead of Redis TIME (its clock stepped back) is continued by + 1."""
    ahead = 5 * 10**15  # microseconds: year 2128, far beyond Redis TIME today
    client.set(KEYS.fence, f"{ahead} 0 tok host:1", px=60_000)
    with redis_lock(client, "job", ttl=5) as first:
        assert first.fencing_token == ahead + 1
    with redis_lock(client, "job", ttl=5) as second:
        assert second.fencing_token == ahead + 2
        fence, _since, token, holder = stored(client, KEYS.fence).split(" ", 3)
        assert (int(fence), token) == (ahead + 2, second.token)
        assert holder.endswith(f":{__import__('os').getpid()}")


def stored_keys(client: redis.Redis) -> list[str]:
    return [k.decode() if isinstance(k, bytes) else k for k in client.keys("*")]


def test_ttl_keeps_milliseconds(client: redis.Redis) -> None:
    """A 0.25 s (or timedelta) ttl becomes PX 250, not truncated to whole seconds."""
    with redis_lock(client, "job", ttl=0.25):
        assert 150 < client.pttl(KEYS.lock) <= 250
    with redis_lock(client, "job", ttl=timedelta(milliseconds=1500)):
        assert 1400 < client.pttl(KEYS.lock) <= 1500


def test_release_after_expiry_keeps_successor(client: redis.Redis) -> None:
    """A holder whose lease lapsed cannot delete its successor's key; it learns it lost."""
    first = RedisLock(client, "job", ttl=5).acquire()
    client.delete(KEYS.lock)  # the lease lapsed
    second = RedisLock(client, "job", ttl=5).acquire()
    assert first.release() is False
    assert first.lost.is_set()
    assert stored(client, KEYS.lock) == second.token
    assert second.fencing_token > first.fencing_token
    assert second.release() is True


def test_with_block_raises_lock_lost_on_exit(client: redis.Redis) -> None:
    """Exiting the with block after the lock was taken raises LockLost and calls on_lost once."""
    calls: list[RedisLock] = []
    with pytest.raises(LockLost), redis_lock(client, "job", ttl=5, on_lost=calls.append) as lock:
        client.set(KEYS.lock, "someone-else")
    assert calls == [lock]
    assert stored(client, KEYS.lock) == "someone-else"


def test_body_exception_wins_over_lock_lost(client: redis.Redis) -> None:
    """If the body raised, that exception propagates, not LockLost."""
    with pytest.raises(KeyError), redis_lock(client, "job", ttl=5) as lock:  # noqa: PT012 - the block's exit is under test
        client.delete(KEYS.lock)
        raise KeyError("body")
    assert lock.lost.is_set()


def test_release_from_another_thread(client: redis.Redis) -> None:
    """The token lives on the handle, so any thread can release (no thread-local surprise)."""
    lock = RedisLock(client, "job", ttl=5).acquire()
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(lock.release()))
    thread.start()
    thread.join()
    assert results == [True]
    assert client.exists(KEYS.lock) == 0


def test_handle_reacquires_with_new_token(client: redis.Redis) -> None:
    """One handle can be acquired again after release, with a new token and fence."""
    lock = RedisLock(client, "job", ttl=5)
    lock.acquire()
    first = (lock.token, lock.fencing_token)
    with pytest.raises(RuntimeError, match="already held"):
        lock.acquire()
    lock.release()
    lock.acquire()
    assert lock.token != first[0]
    assert lock.fencing_token > first[1]
    lock.release()


def test_extend_resets_the_lease(client: redis.Redis) -> None:
    """extend(ttl) sets the key's PTTL to the new ttl; extend on a lost lock raises LockLost."""
    with pytest.raises(LockLost), redis_lock(client, "job", ttl=1) as lock:  # noqa: PT012 - the block's exit is under test
        lock.extend(8)
        assert 7000 < client.pttl(KEYS.lock) <= 8000
        assert lock.remaining() > 7
        client.set(KEYS.lock, "thief")
        with pytest.raises(LockLost):
            lock.extend()
        assert lock.lost.is_set()
        client.delete(KEYS.lock)
        with pytest.raises(LockLost):
            lock.check()


def test_check_raises_when_lease_ran_out(client: redis.Redis) -> None:
    """check() raises once remaining() is 0, without asking Redis."""
    lock = RedisLock(client, "job", ttl=0.05).acquire()
    wait_until(lambda: lock.remaining() == 0.0, timeout=5)
    with pytest.raises(LockLost):
        lock.check()
    # The client's view ends a drift margin (2.5 ms) before Redis's: wait for Redis too.
    wait_until(lambda: client.exists(KEYS.lock) == 0, timeout=5)
    assert lock.release() is False


def test_renewal_keeps_lock_past_ttl(client: redis.Redis) -> None:
    """With renew=True a 0.3 s lock is still ours after six renewals (about two ttls)."""
    with redis_lock(client, "job", ttl=0.3, renew=True) as lock:
        samples = [client.pttl(KEYS.lock)]

        def renewed_six_times() -> bool:
            samples.append(client.pttl(KEYS.lock))
            return sum(b > a for a, b in zip(samples, samples[1:])) >= 6

        wait_until(renewed_six_times, timeout=10, interval=0.02)
        assert stored(client, KEYS.lock) == lock.token
        assert not lock.lost.is_set()
    assert client.exists(KEYS.lock) == 0


def test_renewal_detects_stolen_lock(client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    """A renewal that finds another owner sets lost, calls on_lost, logs WARNING; exit raises."""
    called = threading.Event()
    with (  # noqa: PT012 - the block's exit is under test
        caplog.at_level(logging.WARNING, logger="cronlock"),
        pytest.raises(LockLost),
        redis_lock(client, "job", ttl=0.3, renew=True, on_lost=lambda _l: called.set()) as lock,
    ):
        client.set(KEYS.lock, "thief", px=5000)
        assert lock.lost.wait(5)
        assert called.is_set()
        with pytest.raises(LockLost):
            lock.check()
    assert stored(client, KEYS.lock) == "thief"
    assert any("lost" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_lost_is_set_after_on_lost_has_returned(client: redis.Redis) -> None:
    """A thread woken by ``lost`` finds ``on_lost`` done, however long it took."""
    done: list[bool] = []

    def slow_on_lost(_lock: RedisLock) -> None:
        time.sleep(0.2)
        done.append(True)

    lock = RedisLock(client, "job", ttl=0.3, renew=True, on_lost=slow_on_lost).acquire()
    lost = lock.lost  # created before the loss: the renewal thread sets it
    client.delete(KEYS.lock)
    assert lost.wait(5)
    assert done == [True]
    assert lock.release() is False


def test_renewal_detects_deleted_key(client: redis.Redis) -> None:
    """A renewal that finds no key marks the lock lost."""
    lock = RedisLock(client, "job", ttl=0.3, renew=True).acquire()
    client.delete(KEYS.lock)
    assert lock.lost.wait(5)
    assert not lock.held
    assert lock.release() is False


def test_released_lock_is_not_reported_lost(client: redis.Redis) -> None:
    """Releasing while a renewal is due does not mark the lock lost."""
    for _ in range(20):
        lock = RedisLock(client, "job", ttl=0.03, renew=True).acquire()
        assert lock.release() is True
        assert not lock.lost.is_set()


def test_max_hold_bounds_renewal(client: redis.Redis) -> None:
    """With max_hold the lease ends max_hold after acquiring, and the lock is reported lost."""
    lock = RedisLock(client, "job", ttl=0.3, renew=True, max_hold=0.5).acquire()
    assert lock.lost.wait(5)
    wait_until(lambda: client.exists(KEYS.lock) == 0, timeout=5)
    assert lock.release() is False


def test_renewer_is_shared(client: redis.Redis) -> None:
    """Many renewing locks on one client use its server's one renewal thread, not a thread each."""
    before = threading.active_count()
    locks = [RedisLock(client, f"job{i}", ttl=5, renew=True).acquire() for i in range(20)]
    assert get_renewer(client).running()  # started by the first
    assert threading.active_count() <= before + 1
    for lock in locks:
        lock.release()


def test_released_holds_leave_the_renewer_alone(client: redis.Redis) -> None:
    """Released renew=True holds are dropped at once: the renewer keeps one entry, not one each."""
    pending = get_renewer(client).pending()
    for _ in range(200):
        RedisLock(client, "job", ttl=30, renew=True).acquire().release()
    assert len(HOLDS.of(client)) == 0
    assert get_renewer(client).pending() <= pending + 1
    assert HOLDS.of(client).queued() <= 16


def test_inspect_describes_holder(client: redis.Redis) -> None:
    """inspect() returns holder host:pid, since (aware UTC), ttl and fence; None when free."""
    assert inspect(client, "job") is None
    with redis_lock(client, "job", ttl=5) as lock:
        info = inspect(client, "job")
        assert isinstance(info, LockInfo)
        assert info.token == lock.token
        assert info.fencing_token == lock.fencing_token
        assert info.holder is not None
        assert info.holder.endswith(f":{__import__('os').getpid()}")
        assert info.since is not None
        assert info.since.tzinfo is timezone.utc
        assert abs((datetime.now(timezone.utc) - info.since).total_seconds()) < 60
        assert info.ttl_remaining is not None
        assert 4 < info.ttl_remaining <= 5
    assert inspect(client, "job") is None


def test_noscript_after_script_flush(client: redis.Redis) -> None:
    """After SCRIPT FLUSH every lock script reloads transparently."""
    lock = RedisLock(client, "job", ttl=5, renew=True)
    for _ in range(2):
        client.script_flush()
        lock.acquire()
        client.script_flush()
        lock.extend(5)
        client.script_flush()
        assert inspect(client, "job") is not None
        client.script_flush()
        assert lock.release() is True


def test_unreachable_server_fails_closed(server_factory: Any) -> None:
    """If Redis is down, acquire raises redis-py's ConnectionError, never 'acquired'."""
    server = server_factory()
    client = server.client(socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    server.kill()
    lock = RedisLock(client, "job", ttl=5)
    with pytest.raises(redis.ConnectionError):
        lock.acquire()
    assert not lock.held


def test_server_restart_while_held(server_factory: Any) -> None:
    """A restart (data lost) while held: renewal reports the loss, exit raises, re-acquire works."""
    server = server_factory()
    client = server.client(socket_timeout=2, socket_connect_timeout=2)
    with pytest.raises(LockLost), redis_lock(client, "job", ttl=0.6, renew=True) as lock:  # noqa: PT012 - the block's exit is under test
        fence = lock.fencing_token
        server.restart()
        assert lock.lost.wait(10)
    with redis_lock(client, "job", ttl=5) as again:  # scripts reload after NOSCRIPT
        assert again.fencing_token > fence


def test_renewal_error_retries_then_reports_loss(
    server_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Renewal errors log WARNING and retry; the lock is marked lost once its lease ran out."""
    server = server_factory()
    client = server.client(socket_timeout=0.2, retry=Retry(NoBackoff(), 0))
    with caplog.at_level(logging.WARNING, logger="cronlock"):
        lock = RedisLock(client, "job", ttl=1.5, renew=True).acquire()
        server.pause()
        try:
            assert lock.lost.wait(10)
        finally:
            server.resume()
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("renewing lock 'job' failed" in m for m in messages)
    assert any("lost" in m for m in messages)
    assert lock.remaining() == 0.0
