"""Registrations that run: one function registered twice through `every()`, stepped with
`run_pending` and a fake clock against a real Redis."""

from __future__ import annotations

import redis

from cronlock import CronRunner, FakeClock

T0 = 1_800_000_000.0  # a multiple of 60 s: a slot of every interval below


def test_one_function_registered_twice_with_every_options(client: redis.Redis) -> None:
    """`every(10, key=...)` twice with different handler arguments: two jobs, each slot
    calls its arguments; the options reach the job."""
    sent: list[str] = []

    def send(to: str) -> None:
        sent.append(to)

    runner = CronRunner(client, prefix="reg-every", clock=FakeClock(T0))
    alice = runner.every(10, key="send-alice", ttl=3, retries=1).seconds.do(send, "alice")
    runner.every(10, key="send-bob").seconds.do(send, "bob")
    assert (alice.options.ttl_ms, alice.options.retries) == (3000, 1)
    assert runner.run_pending(T0 + 0.001) == 2
    assert runner.run_pending(T0 + 10.001) == 2
    assert sorted(sent) == ["alice", "alice", "bob", "bob"]
