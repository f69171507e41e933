"""Registrations that run: marked methods of an instance, a module's marked functions, and
one function registered twice through `every()`, stepped with `run_pending` and a fake
clock against a real Redis."""

from __future__ import annotations

import types
from typing import Any

import redis

import cronlock
from cronlock import CronRunner, FakeClock, JobContext

T0 = 1_800_000_000.0  # a multiple of 60 s: a slot of every interval below


class Mailer:
    """Marked methods: one takes the context, one does not."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[Any, ...]] = []

    @cronlock.interval(60, ttl=5)
    def digest(self, ctx: JobContext) -> None:
        self.calls.append(("digest", self, ctx.key, ctx.slot_ms))

    @cronlock.interval(seconds=30, key="mailer-flush")
    def flush(self) -> None:
        self.calls.append(("flush", self))


def test_marked_methods_run_bound_to_their_instance(client: redis.Redis) -> None:
    """register(obj): each slot calls the bound method, with self the instance and the
    context when the method takes one; keys default to module.Class.method."""
    clock = FakeClock(T0)
    runner = CronRunner(client, prefix="reg-methods", clock=clock)
    mailer = Mailer("eu")
    jobs = runner.register(mailer)
    assert [j.key for j in jobs] == [f"{__name__}.Mailer.digest", "mailer-flush"]
    assert runner.run_pending(T0 + 0.001) == 2
    clock.set(T0 + 30.001)
    assert runner.run_pending() == 1
    digest_key = f"{__name__}.Mailer.digest"
    assert mailer.calls == [
        ("digest", mailer, digest_key, int(T0 * 1000)),
        ("flush", mailer),
        ("flush", mailer),
    ]


def test_two_instances_with_key_prefixes_each_run_their_slots(client: redis.Redis) -> None:
    """Two instances of one class registered with key_prefix are separate jobs (the prefix
    goes before the method's name or the marker's key=); a second
    replica registering the same instances shares their slots (each runs once)."""
    mailers = {name: Mailer(name) for name in ("eu", "us")}
    runners = [CronRunner(client, prefix="reg-prefix", clock=FakeClock(T0)) for _ in range(2)]
    for runner in runners:
        for name, mailer in mailers.items():
            runner.register(mailer, key_prefix=name)
    assert sorted(j.key for j in runners[0].jobs) == [
        "eu.digest",
        "eu.mailer-flush",
        "us.digest",
        "us.mailer-flush",
    ]
    assert sum(r.run_pending(T0 + 0.001) for r in runners) == 4
    for name, mailer in mailers.items():
        assert sorted(c[0] for c in mailer.calls) == ["digest", "flush"]
        assert {c[1].name for c in mailer.calls} == {name}


def test_a_modules_marked_functions_run(client: redis.Redis) -> None:
    """register(module) registers and runs the functions marked in it."""
    module = types.ModuleType("reg_jobs")
    exec(
        "import cronlock\n"
        "calls = []\n"
        "@cronlock.interval(60)\n"
        "def refresh(ctx):\n"
        "    calls.append(ctx.key)\n",
        module.__dict__,
    )
    runner = CronRunner(client, prefix="reg-module", clock=FakeClock(T0))
    runner.register(module)
    assert runner.run_pending(T0 + 0.001) == 1
    assert module.calls == ["reg_jobs.refresh"]


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
