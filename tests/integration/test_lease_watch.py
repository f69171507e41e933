"""A run learns that its lease ran out even while its renewal is stuck on a silent Redis.

Renewals go to Redis from the process's one renewal thread. When Redis stops answering
without closing the connection (a network cut that drops packets, a frozen VM), a
renewal on a client without ``socket_timeout`` waits forever, and with one it still
waits up to a timeout per retry. The lease deadline and a job's ``timeout`` are kept on
a second heap whose thread never talks to Redis, so ``ctx.cancelled`` is set on time
whatever the renewal is doing. Before that split, both tests here waited their full
10 s and saw nothing.

The runner's client goes through a :class:`~cronlock.testing.TcpProxy`; the handler
partitions it (everything dropped, nothing closed), so the first renewal hangs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from cronlock import CronRunner, FakeClock, JobContext
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


def _runner(proxy: TcpProxy, prefix: str) -> CronRunner:
    # No socket_timeout: the worst case, a renewal that would wait forever.
    client = redis.Redis(port=proxy.port)
    return CronRunner(client, prefix=prefix, clock=FakeClock(T0 + 0.001))


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
