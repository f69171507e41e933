"""What a runner does when Redis comes back empty (a restart without persistence).

Each test starts its own private server and restarts it empty; the runners are stepped
with ``run_pending`` on fake clocks, so no test waits for a slot.
"""

from __future__ import annotations

from typing import Any, Callable

import redis

from cronlock import CronRunner, FakeClock, JobContext
from cronlock._keys import job_key
from cronlock.stores.redis.claims import ClaimRequest, claim, finish
from cronlock.testing import RedisServer, wait_until

T0 = 1_800_000_000.0  # a multiple of 10 s
PREFIX = "t"
S0 = int(T0 * 1000)
STATE = job_key(PREFIX, "job")


def _restart_empty(server: RedisServer, client: redis.Redis) -> None:
    server.restart()
    client.connection_pool.disconnect()  # the old connections went with the server
    assert client.dbsize() == 0


def test_a_recheck_after_an_empty_restart_does_not_rerun_a_finished_slot(
    server_factory: Callable[..., RedisServer],
) -> None:
    """Told ``taken``, a runner re-checks the slot when the holder's lease would lapse.
    The holder finished it, then Redis restarted empty: the re-check finds no state and
    must not start the slot (it used to win it as attempt 1 and run it again). The next
    slot runs as usual."""
    server = server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    try:
        other = claim(client, ClaimRequest(STATE, S0, "other", 300, 3, "skip", "other:1"))
        assert other.status == "won"
        clock = FakeClock(T0 + 0.001)
        runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5)
        runs: list[Any] = []

        @runner.interval(seconds=10, key="job", catch_up=3)
        def job(ctx: JobContext) -> None:
            runs.append((ctx.slot_ms, ctx.attempt))

        assert runner.run_pending() == 0  # taken: a re-check is queued for the lease's end
        assert finish(client, STATE, S0, "other", "done")
        _restart_empty(server, client)
        wait_until(lambda: client.time()[0] * 1000 > other.lease_until_ms, timeout=5)
        clock.advance(0.4)  # past the lease the runner was told (+ margin): it looks again
        assert runner.run_pending() == 0
        assert runs == []
        assert runner.statistics().slots_forgotten == 1
        assert client.exists(STATE) == 0  # the re-check wrote nothing
        clock.set(T0 + 10.001)
        assert runner.run_pending() == 1
        assert runs == [(S0 + 10_000, 1)]
    finally:
        client.close()
