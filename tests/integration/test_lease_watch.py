"""A run or a lock learns that its lease ran out even while its renewal is stuck.

Renewals go to Redis from the process's one renewal thread. When Redis stops answering
without closing the connection (a network cut that drops packets, a frozen VM), a
renewal on a client without ``socket_timeout`` waits forever, and with one it still
waits up to a timeout per retry. The lease deadline and a job's ``timeout`` are kept on
a second heap whose thread never talks to Redis, so ``ctx.cancelled`` (and a renewing
lock's ``lost``) is set on time whatever the renewal is doing. Before that split, every
test here waited its full 10 s and saw nothing.

The client goes through a :class:`~cronlock.testing.TcpProxy`, which the test
partitions (everything dropped, nothing closed), so the first renewal hangs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cronlock import CronRunner, FakeClock, JobContext, LockLost, RedisLock
from cronlock.testing import RedisServer, TcpProxy

T0 = 1_800_000_000.0


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[TcpProxy]:
    proxy = TcpProxy(("127.0.0.1", redis_server.port)).start()
    try:
        yield proxy
    finally:
        proxy.heal()  # closes the hung connection, so the renewal thread moves on
        proxy.stop()


def _client(proxy: TcpProxy) -> redis.Redis:
    """No socket_timeout (redis-py 8 defaults to 5 s, older releases to none): the worst
    case, a renewal that would wait forever. No retries: when the test heals the proxy,
    the hung call fails at once instead of retrying with back-off on the shared renewal
    thread while the next test wants it."""
    return redis.Redis(
        host="127.0.0.1", port=proxy.port, socket_timeout=None, retry=Retry(NoBackoff(), 0)
    )


def _runner(proxy: TcpProxy, prefix: str) -> CronRunner:
    return CronRunner(_client(proxy), prefix=prefix, clock=FakeClock(T0 + 0.001))


def test_a_run_whose_renewal_hangs_is_cancelled_when_its_lease_runs_out(
    proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    runner = _runner(proxy, "watch-a")
    seen: list[Any] = []

    @runner.interval(seconds=10, key="job", ttl=0.6)
    def job(ctx: JobContext) -> None:
        proxy.partition()  # the renewal due at 0.2 s never gets an answer
        seen.append(ctx.cancelled.wait(10))
        seen.append(ctx.timed_out.is_set())
        proxy.heal()  # the stuck renewal fails now; a second loss is not counted

    with caplog.at_level(logging.WARNING, logger="cronlock"):
        assert runner.run_pending() == 1
    assert seen == [True, False]
    assert runner.statistics().leases_lost == 1
    assert "lease ran out" in caplog.text


def test_a_job_timeout_fires_while_the_renewal_hangs(proxy: TcpProxy) -> None:
    runner = _runner(proxy, "watch-b")
    seen: list[Any] = []

    @runner.interval(seconds=10, key="job", ttl=3, timeout=1.5)
    def job(ctx: JobContext) -> None:
        proxy.partition()  # the renewal due at 1 s never gets an answer
        seen.append(ctx.timed_out.wait(10))
        seen.append(ctx.cancelled.is_set())
        proxy.heal()  # lets the renewal fail and the finish reach Redis

    assert runner.run_pending() == 1
    assert seen == [True, True]
    stats = runner.statistics()
    assert (stats.runs_timed_out, stats.leases_lost) == (1, 0)


def test_a_renewing_lock_whose_renewal_hangs_is_lost_when_its_lease_runs_out(
    proxy: TcpProxy,
) -> None:
    """What ``cronlock exec`` relies on to stop its command: ``lock.lost`` and ``on_lost``."""
    told: list[RedisLock] = []
    lock = RedisLock(_client(proxy), "watch-c", ttl=0.6, renew=True, on_lost=told.append)
    with pytest.raises(LockLost), lock:  # noqa: PT012 - the block's exit is under test
        proxy.partition()  # the renewal due at 0.2 s never gets an answer
        assert lock.lost.wait(10)
        assert told == [lock]
        proxy.heal()  # the release reaches Redis, finds the key gone: LockLost
