"""One renewal heap and thread per server: a renewal hung on a dead server delays no other.

Renewals of one heap run one after another, so with one heap per process a renewal
stuck in a socket read on a paused server held up every lock of the process until the
client's socket timeout, and a healthy server's locks ran out meanwhile. Each server
identity (a connection pool, a cluster client, a SQL store) now has its own heap; an
idle heap's thread exits, and the heaps of dropped clients are forgotten.
"""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cronlock import CronRunner, FakeClock, IntervalSchedule, RedisLock
from cronlock._keys import LockKeys
from cronlock.lock import renewer
from cronlock.lock.renewer import get_renewer
from cronlock.stores import RedisStore
from cronlock.testing import RedisServer, wait_until
from tests.stores import fresh_prefix, sqlite_store

T0 = 1_800_000_000.0


@pytest.fixture
def quick_idle_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Heaps made during the test stop their thread 0.2 s after their last item."""
    monkeypatch.setattr(renewer, "IDLE_EXIT_S", 0.2)


def _renewer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("cronlock-renewer ")]


def test_one_heap_per_connection_pool(redis_server: RedisServer, tmp_path: Path) -> None:
    """Clients sharing a pool (and a store on one) share a heap; another pool has its own,
    and so has each SQL store."""
    one = redis_server.client()
    same_pool = redis.Redis(connection_pool=one.connection_pool)
    other = redis_server.client()
    sql = sqlite_store(tmp_path, "per-server")
    try:
        assert get_renewer(one) is get_renewer(same_pool) is get_renewer(RedisStore(one))
        assert get_renewer(other) is not get_renewer(one)
        assert get_renewer(None) is get_renewer() is not get_renewer(one)
        assert get_renewer(sql) is get_renewer(sql) is not get_renewer()
    finally:
        one.close()
        other.close()
        sql.close()


@pytest.mark.usefixtures("quick_idle_exit")
def test_a_renewal_hung_on_a_paused_server_delays_no_lock_on_another(
    server_factory: type[RedisServer],
) -> None:
    """A paused: its renewal hangs in a socket read for 8 s. B's lock (ttl 1.5 s) is
    renewed on time meanwhile; with one thread per process it ran out behind A's."""
    a, b = server_factory(), server_factory()
    no_retry = Retry(NoBackoff(), 0)
    client_a = a.client(socket_timeout=8, retry=no_retry)
    client_b = b.client(socket_timeout=8, retry=no_retry)
    probe = b.client()  # the test's own reads of B, on a pool of their own
    heaps = get_renewer(client_a), get_renewer(client_b)
    lock_a = RedisLock(client_a, "on-a", ttl=1.5, renew=True).acquire()
    lock_b = RedisLock(client_b, "on-b", ttl=1.5, renew=True).acquire()
    key_b = LockKeys.of("cronlock", "on-b").lock
    try:
        a.pause()  # before A's first renewal (due 0.5 s after its acquire)
        wait_until(lock_a.lost.is_set, timeout=10)  # A's lease ran out; its renewal still hangs
        samples = [probe.pttl(key_b)]

        def renewed_twice_since() -> bool:
            samples.append(probe.pttl(key_b))
            return sum(later > earlier for earlier, later in zip(samples, samples[1:])) >= 2

        wait_until(renewed_twice_since, timeout=5, interval=0.02)  # well within A's 8 s hang
        assert not lock_b.lost.is_set()
        assert lock_b.remaining() > 0
        assert probe.get(key_b).decode() == lock_b.token
    finally:
        a.resume()
        lock_b.release()
        lock_a.release()
        for client in (client_a, client_b, probe):
            client.close()
    wait_until(lambda: not any(heap.running() for heap in heaps), timeout=15)  # no thread left


@pytest.mark.usefixtures("quick_idle_exit")
def test_renewer_threads_of_dropped_clients_go_away(redis_server: RedisServer) -> None:
    """Five clients, five renewal threads; dropped and idle, threads and heaps are gone."""
    before = len(_renewer_threads())
    clients = [redis_server.client(socket_timeout=5) for _ in range(5)]
    locks = [RedisLock(c, f"dropped-{i}", ttl=0.3, renew=True) for i, c in enumerate(clients)]
    for lock in locks:
        lock.acquire()
    heaps = [weakref.ref(get_renewer(c)) for c in clients]
    assert len({id(heap()) for heap in heaps}) == 5
    assert all(heap().running() for heap in heaps)  # type: ignore[union-attr]
    assert len(_renewer_threads()) >= before + 5
    for lock in locks:
        assert lock.release() is True
    for client in clients:
        client.close()
    del locks, clients, lock, client

    def gone() -> bool:
        gc.collect()
        return all(heap() is None for heap in heaps)

    wait_until(gone, timeout=15)  # each thread exits once idle; nothing else keeps a heap
    wait_until(lambda: len(_renewer_threads()) <= before, timeout=15)


def test_a_running_job_renews_from_its_clients_heap(redis_server: RedisServer) -> None:
    """A run's lease is queued on its store's server's heap, not on the shared one."""
    client = redis_server.client(socket_timeout=5)
    seen: list[int] = []
    runner = CronRunner(client, prefix=fresh_prefix(), clock=FakeClock(T0 + 0.001))
    runner.add_job(lambda: seen.append(get_renewer(client).pending()), IntervalSchedule(10))
    try:
        assert runner.run_pending() == 1
        assert seen == [1]  # the run itself, while its handler ran
        assert get_renewer(client) is not get_renewer()
    finally:
        client.close()
