"""The store contract, run on every store (``store`` is parametrised in ``tests/conftest.py``).

Each scenario drives the `Store` protocol directly (claims, renewals, finishes, triggers,
pauses, schedules, heartbeats, history) and asserts what the Lua scripts promise on
Redis; an SQL store decides with `cronlock.stores.sql.machine`, so a difference between
the two shows here. The end-to-end tests at the bottom run real runners on each store.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from cronlock import Admin, CronRunner, FakeClock, JobContext
from cronlock.errors import ConfigurationError
from cronlock.stores import ClaimReply, ClaimStatus, Store, TriggerStatus
from cronlock.stores.types import FinishInfo, Heartbeat, Retention, SlotClaim, TriggerClaim
from cronlock.testing import wait_until

KEEP = Retention(10, 0)
T0 = 1_800_000_000.0


def claim(
    store: Store,
    owner: str,
    slot_ms: int = 1_000,
    *,
    key: str = "a",
    lease_ms: int = 30_000,
    max_attempts: int = 3,
    overlap: str = "skip",
) -> ClaimReply:
    [reply] = store.claim_slots(
        [SlotClaim(key, slot_ms, owner, lease_ms, max_attempts, overlap, f"host:1:{owner}", KEEP)]
    )
    assert isinstance(reply, ClaimReply), reply
    return reply


def finish(
    store: Store, owner: str, slot_ms: int = 1_000, outcome: str = "done", key: str = "a"
) -> bool:
    info = FinishInfo(attempt=1, fence=1, holder=f"host:1:{owner}", duration_ms=5)
    return store.finish(key, slot_ms, owner, outcome, retention=KEEP, info=info)


def lapse(store: Store, reply: ClaimReply) -> None:
    """Wait until the store's clock is past ``reply``'s lease (leases are a few ms)."""
    wait_until(lambda: store.time_ms() > reply.lease_until_ms, timeout=5, interval=0.002)


def events(store: Store, key: str = "a") -> list[str]:
    return [entry.event for entry in store.history(key, 50)]


def test_one_owner_wins_a_slot_and_the_others_are_told_it_is_taken(store: Store) -> None:
    """Claims of one slot in one batch: the first wins, the next is `taken` (same lease)."""
    won, taken = store.claim_slots(
        [
            SlotClaim("a", 1_000, "me", 30_000, 3, "skip", "h:1:me", KEEP),
            SlotClaim("a", 1_000, "you", 30_000, 3, "skip", "h:1:you", KEEP),
        ]
    )
    assert isinstance(won, ClaimReply)
    assert isinstance(taken, ClaimReply)
    assert (won.status, won.attempt, won.fence) == (ClaimStatus.WON, 1, 1)
    assert taken.status is ClaimStatus.TAKEN
    assert taken.lease_until_ms == won.lease_until_ms
    assert taken.server_now_ms <= won.lease_until_ms


def test_the_same_owner_claiming_again_keeps_its_attempt_and_fence(store: Store) -> None:
    """A retried claim (its reply lost) wins again with the same attempt and fence."""
    first = claim(store, "me")
    again = claim(store, "me")
    assert again.status is ClaimStatus.WON
    assert (again.attempt, again.fence) == (first.attempt, first.fence)
    assert again.lease_until_ms >= first.lease_until_ms


def test_a_finished_slot_is_done_and_an_older_slot_is_stale(store: Store) -> None:
    claim(store, "me", 2_000)
    assert finish(store, "me", 2_000)
    done = claim(store, "you", 2_000)
    assert (done.status, done.detail) == (ClaimStatus.DONE, "done")
    stale = claim(store, "you", 1_000)
    assert (stale.status, stale.detail) == (ClaimStatus.STALE, "2000")


def test_renew_and_finish_act_only_for_the_owner(store: Store) -> None:
    won = claim(store, "me")
    assert store.renew("a", 1_000, "stranger", 30_000) is None
    renewed = store.renew("a", 1_000, "me", 60_000)
    assert renewed is not None
    assert renewed > won.lease_until_ms
    assert not finish(store, "stranger")
    assert finish(store, "me")
    assert not finish(store, "me")  # a second finish finds the slot no longer running
    assert events(store) == ["succeeded", "running"]


def test_a_lapsed_lease_is_taken_over_as_the_next_attempt_with_a_higher_fence(store: Store) -> None:
    first = claim(store, "me", lease_ms=20)
    lapse(store, first)
    second = claim(store, "you")
    assert (second.status, second.attempt) == (ClaimStatus.WON, 2)
    assert second.fence > first.fence
    assert store.renew("a", 1_000, "me", 30_000) is None  # the old owner lost it
    assert not finish(store, "me")
    assert events(store)[:2] == ["running", "taken_over"]


def test_after_max_attempts_the_slot_is_abandoned(store: Store) -> None:
    reply = claim(store, "me", lease_ms=20, max_attempts=1)
    lapse(store, reply)
    exhausted = claim(store, "you", max_attempts=1)
    assert (exhausted.status, exhausted.attempt) == (ClaimStatus.EXHAUSTED, 1)
    [state] = store.job_states(["a"])
    assert state.fields["status"] == "failed"
    assert state.fields["last_error"] == "abandoned"
    assert state.fields["failures"] == "1"
    assert events(store)[0] == "abandoned"
    assert claim(store, "them").status is ClaimStatus.DONE


def test_fencing_tokens_increase_strictly_across_slots(store: Store) -> None:
    fences = []
    for slot_ms in (1_000, 2_000, 3_000, 4_000):
        reply = claim(store, f"o{slot_ms}", slot_ms)
        fences.append(reply.fence)
        assert finish(store, f"o{slot_ms}", slot_ms)
    assert fences == sorted(set(fences))
    assert len(fences) == 4


def test_overlap_skip_makes_a_newer_slot_busy_while_the_old_run_lives(store: Store) -> None:
    old = claim(store, "me", 1_000)
    busy = claim(store, "you", 2_000)
    assert busy.status is ClaimStatus.BUSY
    assert busy.lease_until_ms == old.lease_until_ms


def test_overlap_allow_keeps_the_old_run_renewing_and_finishing(store: Store) -> None:
    claim(store, "me", 1_000, overlap="allow")
    newer = claim(store, "you", 2_000, overlap="allow")
    assert newer.status is ClaimStatus.WON
    assert store.renew("a", 1_000, "me", 30_000) is not None
    assert finish(store, "me", 1_000)
    assert finish(store, "you", 2_000)
    assert events(store).count("succeeded") == 2


def test_overlap_replace_cuts_the_old_run_short(store: Store) -> None:
    claim(store, "me", 1_000, overlap="replace")
    assert claim(store, "you", 2_000, overlap="replace").status is ClaimStatus.WON
    assert store.renew("a", 1_000, "me", 30_000) is None
    assert "replaced" in events(store)


def test_a_newer_slot_over_a_lapsed_run_records_it_as_expired(store: Store) -> None:
    old = claim(store, "me", 1_000, lease_ms=20)
    lapse(store, old)
    assert claim(store, "you", 2_000).status is ClaimStatus.WON
    assert events(store)[:2] == ["running", "expired"]


def test_a_paused_job_refuses_claims_until_resumed(store: Store) -> None:
    store.pause("a")
    assert claim(store, "me").status is ClaimStatus.PAUSED
    store.resume("a")
    assert claim(store, "me").status is ClaimStatus.WON


def test_pause_all_pauses_the_given_jobs_and_every_job_registered_later(store: Store) -> None:
    assert store.register_jobs({"a": "{}"}) == ["a"]
    store.pause_all(["a"])
    assert store.pause_all_active()
    assert store.register_jobs({"a": "{}", "b": "{}"}) == ["b"]
    assert claim(store, "me", key="b").status is ClaimStatus.PAUSED
    store.resume_all(["a", "b"])
    assert not store.pause_all_active()
    assert claim(store, "me", key="a").status is ClaimStatus.WON
    assert claim(store, "me", key="b").status is ClaimStatus.WON
    assert set(store.registry()) == {"a", "b"}
    assert store.registry_entry("b") == "{}"
    assert store.registry_entry("c") is None


def test_a_trigger_runs_once_in_the_fleet(store: Store) -> None:
    store.queue_trigger("a", "t1|0|1000|ops", 100)
    assert store.sync(None).pending_triggers == frozenset({"a"})
    assert store.job_states(["a"])[0].pending_triggers == 1
    take = TriggerClaim("a", "me", 30_000, "skip", "h:1:me", KEEP)
    won = store.take_trigger(take)
    assert (won.status, won.trigger_id) == (TriggerStatus.WON, "t1")
    assert store.take_trigger(TriggerClaim("a", "you", 30_000, "skip", "h:1:you", KEEP)).status is (
        TriggerStatus.NONE
    )
    assert store.renew("a", won.slot_ms, "me", 30_000) is not None
    info = FinishInfo(attempt=1, fence=won.fence, holder="h:1:me", kind="manual")
    assert store.finish("a", won.slot_ms, "me", "done", retention=KEEP, info=info)
    store.clear_triggers(["a"])
    assert store.sync(None).pending_triggers == frozenset()
    assert [(e.event, e.kind) for e in store.history("a", 10)] == [
        ("succeeded", "manual"),
        ("running", "manual"),
    ]


def test_a_trigger_of_a_paused_or_busy_job_is_dropped_unless_forced(store: Store) -> None:
    take = TriggerClaim("a", "me", 30_000, "skip", "h:1:me", KEEP)
    store.pause("a")
    store.queue_trigger("a", "t1|0|1000|ops", 100)
    store.queue_trigger("a", "t2|1|1000|ops", 100)
    assert store.take_trigger(take).status is TriggerStatus.PAUSED
    assert store.take_trigger(take).status is TriggerStatus.WON  # forced
    store.resume("a")
    store.queue_trigger("a", "t3|0|1000|ops", 100)
    busy = store.take_trigger(TriggerClaim("a", "you", 30_000, "skip", "h:1:you", KEEP))
    assert (busy.status, busy.trigger_id) == (TriggerStatus.BUSY, "t3")
    reasons = [e.reason for e in store.history("a", 10) if e.event == "skipped"]
    assert reasons == ["busy", "paused"]


def test_a_trigger_taken_after_its_expiry_is_dropped_even_when_forced(store: Store) -> None:
    now = store.time_ms()
    take = TriggerClaim("a", "me", 30_000, "allow", "h:1:me", KEEP)
    store.queue_trigger("a", f"t1|1|{now}|ops|{now}", 100)  # expired: forced or not
    store.queue_trigger("a", f"t2|0|{now}|ops|{now + 60_000}", 100)
    expired = store.take_trigger(take)
    assert (expired.status, expired.trigger_id) == (TriggerStatus.EXPIRED, "t1")
    assert store.take_trigger(take).status is TriggerStatus.WON
    [skipped] = [e for e in store.history("a", 10) if e.event == "skipped"]
    assert (skipped.reason, skipped.trigger_id) == ("expired", "t1")


def test_pending_triggers_keep_only_the_latest(store: Store) -> None:
    for n in range(5):
        store.queue_trigger("a", f"t{n}|0|1000|ops", 3)
    assert store.job_states(["a"])[0].pending_triggers == 3
    first = store.take_trigger(TriggerClaim("a", "me", 30_000, "allow", "h", KEEP))
    assert first.trigger_id == "t2"


def test_dynamic_schedules_change_the_version_each_time(store: Store) -> None:
    assert store.schedules_version() is None
    store.put_schedule("s1", json.dumps({"cron": "* * * * *"}))
    v1 = store.schedules_version()
    store.put_schedule("s1", json.dumps({"cron": "*/5 * * * *"}))
    v2 = store.schedules_version()
    assert v1 is not None
    assert v2 is not None
    assert v1 != v2
    assert store.schedules() == {"s1": json.dumps({"cron": "*/5 * * * *"})}
    assert store.schedule_count() == 1
    assert store.remove_schedule("s1")
    assert not store.remove_schedule("s1")
    assert store.schedules() == {}
    assert store.schedules_version() not in (v1, v2)
    assert store.sync(None).schedules_version == store.schedules_version()


def test_heartbeats_are_listed_until_deleted(store: Store) -> None:
    store.sync(Heartbeat("r1", json.dumps({"id": "r1"}), 30))
    store.sync(Heartbeat("r2", json.dumps({"id": "r2"}), 30))
    beats = sorted(store.heartbeats())
    assert [json.loads(value)["id"] for value, _ in beats] == ["r1", "r2"]
    assert all(left is not None and 0 < left <= 30 for _, left in beats)
    store.delete_heartbeat("r1")
    assert [json.loads(value)["id"] for value, _ in store.heartbeats()] == ["r2"]


def test_history_is_newest_first_and_capped_per_job(store: Store) -> None:
    kept = Retention(3, 0)
    for slot_ms in range(1_000, 6_000, 1_000):
        [reply] = store.claim_slots([SlotClaim("a", slot_ms, "me", 30_000, 3, "skip", "h", kept)])
        assert isinstance(reply, ClaimReply)
        assert reply.status is ClaimStatus.WON
        info = FinishInfo(attempt=1, fence=reply.fence, holder="h")
        assert store.finish("a", slot_ms, "me", "done", retention=kept, info=info)
    entries = store.history("a", 10)
    assert [(e.event, e.slot and int(e.slot.timestamp() * 1000)) for e in entries] == [
        ("succeeded", 5_000),
        ("running", 5_000),
        ("succeeded", 4_000),
    ]
    assert entries[0].at >= entries[-1].at


def test_forget_drops_a_jobs_state_history_registry_and_triggers(store: Store) -> None:
    store.register_jobs({"a": "{}"})
    claim(store, "me")
    store.queue_trigger("a", "t1|0|1000|ops", 100)
    assert store.forget("a")
    assert store.registry_entry("a") is None
    assert store.job_states(["a"])[0].fields == {}
    assert store.job_states(["a"])[0].pending_triggers == 0
    assert store.history("a", 10) == []
    assert not store.forget("a")
    assert claim(store, "me").attempt == 1  # a new life for the key


def test_the_store_clock_is_close_to_the_hosts(store: Store) -> None:
    assert abs(store.time_ms() - time.time() * 1000) < 5_000
    store.ping()


def test_wait_replicas_is_refused_where_the_store_cannot_wait(store: Store) -> None:
    if type(store).__name__ == "RedisStore":
        assert store.check_replication(0, 100) is None
        return
    with pytest.raises(ConfigurationError, match="wait_replicas=1"):
        store.check_replication(1, 100)


def test_replicas_on_one_store_run_each_slot_once_in_fence_order(store: Store) -> None:
    """Three runners with skewed fake clocks step through 20 slots (``run_pending``):
    every slot ran once, on one of them, with strictly increasing fencing tokens."""
    runs: list[tuple[int, int]] = []
    clocks = [FakeClock(T0 - 5) for _ in range(3)]
    runners = [CronRunner(store, clock=clock, default_ttl=5) for clock in clocks]
    for runner in runners:

        @runner.interval(seconds=10, key="job", catch_up=3)
        def job(ctx: JobContext) -> None:
            runs.append((ctx.slot_ms, ctx.fencing_token))

    for step in range(20):
        for skew, (clock, runner) in enumerate(zip(clocks, runners)):
            clock.set(T0 + step * 10 + 0.001 + skew * 0.2)
            runner.run_pending()
    assert [slot for slot, _ in runs] == [int((T0 + i * 10) * 1000) for i in range(20)]
    fences = [fence for _, fence in runs]
    assert fences == sorted(set(fences))


def test_admin_triggers_a_job_a_runner_on_the_store_runs(store: Store) -> None:
    ran = threading.Event()
    runner = CronRunner(store, clock=FakeClock(T0), poll_interval=0.2)

    @runner.interval(seconds=3600, key="job")
    def job() -> None:
        ran.set()

    runner.start()
    try:
        admin = Admin(store)
        wait_until(lambda: "job" in store.registry() and admin.runners(), timeout=10)
        # registered, not only alive: a trigger of a job not yet registered is refused
        admin.trigger("job")
        assert ran.wait(10)
        [status] = [s for s in admin.jobs() if s.key == "job"]
        assert status.key == "job"
        wait_until(lambda: any(e.event == "succeeded" for e in admin.history("job")), timeout=10)
    finally:
        runner.stop(timeout=5)


def test_a_started_runner_registers_before_its_first_claim_so_pause_all_holds(
    store: Store,
) -> None:
    """Pause-all set before a runner with a new job starts: the slot due at start is
    refused as paused (the registry is written before the first claim), never run."""
    store.pause_all([])
    ran = threading.Event()
    runner = CronRunner(store, clock=FakeClock(T0 + 0.001))

    @runner.interval(seconds=10, key="fresh")
    def fresh() -> None:
        ran.set()

    runner.start()
    try:
        wait_until(lambda: runner.statistics().claims_paused >= 1, timeout=10)
    finally:
        runner.stop(timeout=5)
    assert not ran.is_set()
    assert store.job_states(["fresh"])[0].fields.get("paused") == "1"
