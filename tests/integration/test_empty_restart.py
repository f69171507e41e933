"""What a runner does when Redis comes back empty (a restart without persistence).

Each test starts its own private server and restarts it empty; the runners are stepped
with ``run_pending`` on fake clocks, so no test waits for a slot.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import redis

from cronlock import Admin, CronRunner, FakeClock, IntervalSchedule, JobContext, RedisLock
from cronlock._keys import job_key
from cronlock.stores import ClaimReply, ClaimStatus, RedisStore
from cronlock.stores.redis.claims import ClaimRequest, claim, finish
from cronlock.stores.types import FinishInfo, OperationalState, Retention, SlotClaim
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
            runs.append((ctx.slot_ms, ctx.attempt, ctx.fencing_token))

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
        assert runs == [(S0 + 10_000, 1, 1)]  # the fencing counter started again from 1
    finally:
        client.close()


def test_a_run_in_progress_is_lost_by_an_empty_restart(
    server_factory: Callable[..., RedisServer],
) -> None:
    """A run going when Redis restarts empty renews as lost, its finish is refused (it
    writes nothing), and a replica re-checking its slot does not start it."""
    server = server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    try:
        store = RedisStore(client, prefix=PREFIX)
        request = SlotClaim("job", S0, "owner", 60_000, 3, "skip", "h:1:a", Retention(10, 0))
        [won] = store.claim_slots([request])
        assert isinstance(won, ClaimReply)
        assert won.status is ClaimStatus.WON
        _restart_empty(server, client)
        assert store.renew("job", S0, "owner", 60_000) is None
        info = FinishInfo(attempt=1, fence=won.fence, holder="h:1:a")
        assert not store.finish("job", S0, "owner", "done", retention=Retention(10, 0), info=info)
        assert client.dbsize() == 0
        [again] = store.claim_slots([replace(request, owner="watcher", recheck=True)])
        assert isinstance(again, ClaimReply)
        assert again.status is ClaimStatus.GONE
        assert client.dbsize() == 0
    finally:
        client.close()


def _events(admin: Admin, key: str) -> list[tuple[str, str]]:
    return [(e.event, e.reason or "") for e in admin.history(key, limit=50)]


def test_pauses_and_dynamic_schedules_come_back_after_an_empty_restart(
    server_factory: Callable[..., RedisServer],
) -> None:
    """What operators decided survives: two runners kept the pause flag and the dynamic
    schedule they last synced; after the restart the first to sync puts them back, once,
    with a ``restored`` history entry each, and the paused job stays paused. What the
    restart forgets stays forgotten: run history, pending triggers, failure counts."""
    server = server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    clock = FakeClock(T0 + 0.001)
    runners = []
    runs: list[Any] = []
    try:
        for _ in range(2):
            runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5)
            runner.add_job(lambda ctx: runs.append(ctx.key), IntervalSchedule(10), key="job")
            runner.add_job(lambda: None, IntervalSchedule(10), key="other", catch_up=0)

            @runner.task("reindex")
            def reindex(ctx: JobContext) -> None:
                runs.append(ctx.key)

            runners.append(runner)
        a, b = runners
        admin = Admin(client, prefix=PREFIX)
        admin.add_schedule("reindex", interval=10, schedule_id="reindex-users")
        a.sync()
        assert a.run_pending() == 2  # slot T0 of "job" and the schedule run: history
        admin.pause("job")
        admin.trigger("other")
        for runner in runners:
            runner.sync()
        assert [j.key for j in a.jobs if j.key == "reindex-users"] == ["reindex-users"]

        _restart_empty(server, client)
        assert admin.list_schedules() == []
        a.sync()
        b.sync()  # the restore is claimed once per epoch: b writes nothing more

        assert admin.job("job").paused
        assert [s.id for s in admin.list_schedules()] == ["reindex-users"]
        assert _events(admin, "job") == [("restored", "paused")]  # the runs' history is gone
        assert _events(admin, "reindex-users") == [("restored", "schedule")]
        assert admin.job("other").pending_triggers == 0  # pending manual runs are forgotten
        assert admin.job("job").consecutive_failures == 0
        assert admin.job("job").registered  # the registry is written again
        assert "reindex-users" in [j.key for j in b.jobs]  # never dropped meanwhile

        del runs[:]
        clock.set(T0 + 10.001)
        a.run_pending()
        assert runs == ["reindex-users"]  # "job" stays paused; the schedule runs
        assert a.statistics().claims_paused == 1
    finally:
        client.close()


def test_pause_all_comes_back_after_an_empty_restart(
    server_factory: Callable[..., RedisServer],
) -> None:
    """Fleet-wide pause is restored too: every job known paused, and a job registered
    afterwards starts paused."""
    server = server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    clock = FakeClock(T0 + 0.001)
    try:
        runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5)
        runner.add_job(lambda: None, IntervalSchedule(10), key="job")
        admin = Admin(client, prefix=PREFIX)
        runner.sync()
        assert admin.pause_all() == 1
        runner.sync()
        _restart_empty(server, client)
        runner.sync()
        assert admin.status().pause_all
        assert admin.job("job").paused
        runner.add_job(lambda: None, IntervalSchedule(10), key="later")
        runner.sync()
        assert admin.job("later").paused
        assert runner.run_pending() == 0
    finally:
        client.close()


def test_a_held_lock_is_forgotten_by_an_empty_restart(
    server_factory: Callable[..., RedisServer],
) -> None:
    """A lock held when Redis restarts empty can be taken by another holder at once; the
    first holder's release finds it lost."""
    server = server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    try:
        first = RedisLock(client, "nightly", ttl=60).acquire()
        _restart_empty(server, client)
        second = RedisLock(client, "nightly", ttl=60).acquire()
        assert second.held
        assert first.release() is False
        assert second.release() is True
    finally:
        client.close()


def test_the_restore_is_claimed_once_per_epoch(
    server_factory: Callable[..., RedisServer],
) -> None:
    """Only the runner that claimed an epoch's restore writes it; the same runner may try
    again (a restore that failed midway), and it only adds what is missing."""
    server = server_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    try:
        store = RedisStore(client, prefix=PREFIX)
        state = OperationalState(paused=frozenset({"job"}), schedules={"s1": '{"task": "t"}'})
        keep = Retention(10, 0)
        assert store.restore("e1", state, "h:1:a", keep) == ["paused:job", "schedule:s1"]
        assert store.restore("e1", state, "h:2:b", keep) is None  # another runner: no
        assert store.restore("e1", state, "h:1:a", keep) == []  # again: nothing missing
        assert store.operational_state() == OperationalState(
            paused=frozenset({"job"}), pause_all=False, schedules={"s1": '{"task": "t"}'}
        )
        assert [e.event for e in store.history("job", 10)] == ["restored"]
    finally:
        client.close()
