"""The runner driven step by step (``run_pending``) with fake clocks against a real Redis.

Several runners in one process stand for several replicas: they share the server and
the prefix, and each has its own clock, so skew is exact and no test sleeps for a slot.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from cronlock import CronRunner, FakeClock, JobContext
from cronlock._keys import job_key
from cronlock.context import ErrorContext
from cronlock.stores.redis.claims import ClaimRequest, claim
from cronlock.testing import wait_until

T0 = 1_800_000_000.0  # a multiple of 10 s: slot boundaries of a 10 s interval
PREFIX = "t"


def replica(client: redis.Redis, clock: FakeClock, runs: list[Any], **kw: Any) -> CronRunner:
    """A runner with one 10 s interval job that records (replica, slot, attempt)."""
    runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5, **kw)
    name = f"r{len(runs)}-{id(clock)}"

    @runner.interval(seconds=10, key="job", catch_up=3)
    def job(ctx: JobContext) -> None:
        runs.append((name, ctx.slot_ms, ctx.attempt, ctx.fencing_token))

    return runner


def test_each_slot_runs_on_exactly_one_of_several_replicas(client: redis.Redis) -> None:
    """Three replicas stepping through 20 slots: every slot runs once, on one replica."""
    runs: list[Any] = []
    clocks = [FakeClock(T0 - 5) for _ in range(3)]
    runners = [replica(client, c, runs) for c in clocks]
    for step in range(20):
        for clock, runner in zip(clocks, runners):
            clock.set(T0 + step * 10 + 0.001)
            runner.run_pending()
    slots = [r[1] for r in runs]
    assert sorted(slots) == [int((T0 + i * 10) * 1000) for i in range(20)]
    assert len(set(slots)) == len(slots)
    fences = [r[3] for r in runs]
    assert fences == sorted(fences)
    assert len(set(fences)) == len(fences)


def test_a_late_replica_never_reruns_a_finished_slot(client: redis.Redis) -> None:
    """A replica whose clock is 0.4 s behind reaches each slot after it is done: skipped.

    A lock keyed by name alone (acquire, run 0.1 s, release) would let the late replica
    acquire the freed lock and run the same occurrence a second time; the slot key
    does not.
    """
    runs: list[Any] = []
    early, late = FakeClock(T0), FakeClock(T0 - 0.4)
    a, b = replica(client, early, runs), replica(client, late, runs)
    for step in range(5):
        early.set(T0 + step * 10 + 0.001)
        a.run_pending()
        late.set(T0 + step * 10 + 0.001)  # the late clock reaches the boundary 0.4 s later
        b.run_pending()
    assert [r[0] for r in runs] == [runs[0][0]] * 5
    assert b.statistics().claims_lost == 5


def test_a_replica_with_a_late_clock_cannot_revive_an_older_slot(client: redis.Redis) -> None:
    """Once a newer slot was claimed, an older slot is stale for everyone."""
    runs: list[Any] = []
    ahead, behind = FakeClock(T0 + 10.001), FakeClock(T0 + 0.001)
    a = replica(client, ahead, runs)
    a.run_pending()  # claims slot T0+10 (T0 is beyond its 3 s catch-up... and also older)
    b = replica(client, behind, runs)
    b.run_pending()  # slot T0: older than the stored slot
    assert [r[1] for r in runs] == [int((T0 + 10) * 1000)]


def test_a_lapsed_lease_is_taken_over_as_the_next_attempt(client: redis.Redis) -> None:
    """A claimed slot whose owner never renews is taken over with attempt 2."""
    slot_ms = int(T0 * 1000)
    state = job_key(PREFIX, "job")
    dead = claim(client, ClaimRequest(state, slot_ms, "dead-owner", 200, 3, "skip", "x"))
    assert (dead.status, dead.attempt) == ("won", 1)
    runs: list[Any] = []
    clock = FakeClock(T0 + 0.001)
    runner = replica(client, clock, runs)
    assert runner.run_pending() == 0  # taken: the lease is still live
    wait_until(lambda: client.pttl(state) == -1 and _lease_lapsed(client, state), timeout=5)
    clock.advance(0.3)  # past the lease deadline it learned (+ margin): it looks again
    assert runner.run_pending() == 1
    assert [(r[1], r[2]) for r in runs] == [(slot_ms, 2)]
    assert runs[0][3] > dead.fence


def _lease_lapsed(client: redis.Redis, state: str) -> bool:
    lease = int(client.hget(state, "lease") or 0)
    now_s, now_us = client.time()
    return lease <= now_s * 1000 + now_us // 1000


def test_takeover_stops_after_max_attempts(client: redis.Redis) -> None:
    """A slot whose lease lapses max_attempts times is marked failed, not retried forever."""
    slot_ms = int(T0 * 1000)
    state = job_key(PREFIX, "job")
    for owner in ("o1", "o2"):
        reply = claim(client, ClaimRequest(state, slot_ms, owner, 1, 2, "skip", "x"))
        assert reply.status == "won"
        wait_until(lambda: _lease_lapsed(client, state), timeout=5)
    reply = claim(client, ClaimRequest(state, slot_ms, "o3", 1000, 2, "skip", "x"))
    assert reply.status == "exhausted"
    assert client.hget(state, "status") in (b"failed", "failed")


def test_overlap_skip_does_not_start_a_slot_while_the_previous_run_is_alive(
    client: redis.Redis,
) -> None:
    """With overlap "skip", the next slot is skipped while the previous lease is live."""
    state = job_key(PREFIX, "job")
    claim(client, ClaimRequest(state, int(T0 * 1000), "slow", 60_000, 3, "skip", "x"))
    runs: list[Any] = []
    clock = FakeClock(T0 + 10.001)
    runner = replica(client, clock, runs)
    assert runner.run_pending() == 0
    assert runner.statistics().claims_skipped == 1


def test_overlap_allow_starts_the_next_slot_and_keeps_the_old_lease(client: redis.Redis) -> None:
    """With overlap "allow", a new slot starts and the old run can still renew and finish."""
    from cronlock.stores.redis.claims import finish, renew

    state = job_key(PREFIX, "job")
    old = int(T0 * 1000)
    claim(client, ClaimRequest(state, old, "slow", 60_000, 3, "allow", "x"))
    new = claim(client, ClaimRequest(state, old + 10_000, "fresh", 60_000, 3, "allow", "x"))
    assert new.status == "won"
    assert renew(client, state, old, "slow", 60_000) is not None
    assert finish(client, state, old, "slow", "done")
    assert renew(client, state, old, "slow", 60_000) is None  # finished: nothing left to renew


def test_overlap_replace_cancels_the_old_run(client: redis.Redis) -> None:
    """With overlap "replace", the old run's next renewal reports the lease lost."""
    from cronlock.stores.redis.claims import renew

    state = job_key(PREFIX, "job")
    old = int(T0 * 1000)
    claim(client, ClaimRequest(state, old, "slow", 60_000, 3, "replace", "x"))
    assert (
        claim(client, ClaimRequest(state, old + 10_000, "new", 60_000, 3, "replace", "x")).status
        == "won"
    )
    assert renew(client, state, old, "slow", 60_000) is None


def test_a_claim_whose_reply_was_lost_is_recognised_when_retried(client: redis.Redis) -> None:
    """Claiming again with the same owner token returns the same win (not "taken")."""
    state = job_key(PREFIX, "job")
    request = ClaimRequest(state, int(T0 * 1000), "me", 60_000, 3, "skip", "x")
    first, again = claim(client, request), claim(client, request)
    assert again.status == "won"
    assert (again.attempt, again.fence) == (first.attempt, first.fence)


def test_a_retried_claim_starts_its_lease_again(client: redis.Redis) -> None:
    """The retry's win carries a fresh lease: the owner counts its lease from the retry
    and renews a third of a lease later, so the first claim's lease must not lapse first
    (it did: a watcher took the slot over while the retried run was still going)."""
    state = job_key(PREFIX, "job")
    request = ClaimRequest(state, int(T0 * 1000), "me", 60_000, 3, "skip", "x")
    assert claim(client, request).status == "won"
    seconds, micros = client.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    client.hset(state, "lease", now_ms - 1)  # the first lease ran out before the retry came
    again = claim(client, request)
    assert again.status == "won"
    assert again.lease_until_ms >= now_ms + 59_000
    watcher = ClaimRequest(state, int(T0 * 1000), "watcher", 60_000, 3, "skip", "y")
    assert claim(client, watcher).status == "taken"


@pytest.mark.parametrize(
    ("late_by", "expect_run"),
    [(2.0, True), (4.0, False)],
    ids=["within-catch-up-runs", "beyond-catch-up-skips"],
)
def test_catch_up_after_a_start_late_in_the_slot(
    client: redis.Redis, late_by: float, expect_run: bool
) -> None:
    """A runner started 2 s into a slot (catch-up 3 s) still runs it; 4 s late it waits."""
    runs: list[Any] = []
    clock = FakeClock(T0 + late_by)
    runner = replica(client, clock, runs)
    assert runner.run_pending() == int(expect_run)


def test_missed_slots_are_coalesced_into_the_latest(client: redis.Redis) -> None:
    """After a long pause, the latest slot within catch-up runs once; older ones do not."""
    runs: list[Any] = []
    clock = FakeClock(T0 + 0.001)
    runner = replica(client, clock, runs)
    runner.run_pending()
    clock.set(T0 + 60 + 1)  # five slots passed while "paused"
    runner.run_pending()
    assert [r[1] for r in runs] == [int(T0 * 1000), int((T0 + 60) * 1000)]


def test_paused_job_does_not_run(client: redis.Redis) -> None:
    """A paused flag in the job's state is honoured by the claim itself."""
    client.hset(job_key(PREFIX, "job"), "paused", "1")
    runs: list[Any] = []
    runner = replica(client, FakeClock(T0 + 0.001), runs)
    assert runner.run_pending() == 0
    assert runner.statistics().claims_paused == 1


def test_redis_down_fails_closed_and_reports_acquire(server_factory) -> None:  # type: ignore[no-untyped-def]
    """With Redis unreachable the job does not run; on_error gets phase "acquire"."""
    server = server_factory()
    client = server.client(socket_timeout=1, socket_connect_timeout=1)
    errors: list[tuple[str, ErrorContext]] = []
    runs: list[Any] = []
    runner = replica(
        client,
        FakeClock(T0 + 0.001),
        runs,
        on_error=lambda e, c: errors.append((type(e).__name__, c)),
    )
    server.kill()
    assert runner.run_pending() == 0
    assert runs == []
    assert errors
    assert errors[0][1].phase == "acquire"
    assert errors[0][1].key == "job"
    server.start()
    runner.clock.advance(1.0)  # type: ignore[attr-defined]
    assert runner.run_pending() == 1  # the same slot, retried within catch-up


def test_a_handler_error_goes_to_on_error_and_the_slot_is_done(client: redis.Redis) -> None:
    """A raising handler is reported with phase "handler"; the slot is finished as failed."""
    errors: list[Any] = []
    runner = CronRunner(
        client,
        prefix=PREFIX,
        clock=FakeClock(T0 + 0.001),
        on_error=lambda e, c: errors.append((e, c)),
    )

    @runner.interval(seconds=10, key="boom")
    def boom() -> None:
        raise RuntimeError("boom")

    runner.run_pending()
    assert [(str(e), c.phase, c.key) for e, c in errors] == [("boom", "handler", "boom")]
    state = client.hgetall(job_key(PREFIX, "boom"))
    assert {k if isinstance(k, str) else k.decode(): v for k, v in state.items()}["status"] in (
        b"failed",
        "failed",
    )
    assert runner.statistics().runs_failed == 1


def test_retries_run_again_within_the_same_slot(client: redis.Redis) -> None:
    """retries=2 calls a failing handler up to three times inside one claim."""
    calls: list[int] = []
    runner = CronRunner(
        client, prefix=PREFIX, clock=FakeClock(T0 + 0.001), on_error=lambda e, c: None
    )

    @runner.interval(seconds=10, key="flaky", retries=2, retry_backoff=0)
    def flaky(ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        if len(calls) < 3:
            raise RuntimeError("not yet")

    runner.run_pending()
    assert calls == [1, 1, 1]
    assert runner.statistics().runs_succeeded == 1


def test_context_fields(client: redis.Redis) -> None:
    """The handler's context carries key, slot, attempt, fencing token and idempotency key."""
    seen: list[JobContext] = []
    runner = CronRunner(client, prefix=PREFIX, clock=FakeClock(T0 + 0.001))

    @runner.interval(seconds=10, key="ctx")
    def handler(ctx: JobContext) -> None:
        seen.append(ctx)

    runner.run_pending()
    (ctx,) = seen
    assert ctx.key == "ctx"
    assert ctx.slot.timestamp() == T0
    assert ctx.slot.tzinfo is not None
    assert ctx.attempt == 1
    assert ctx.fencing_token == 1
    assert ctx.idempotency_key == f"ctx:{int(T0 * 1000)}"
    assert not ctx.cancelled.is_set()
    ctx.check()


def test_corrupt_state_is_reported_and_other_jobs_still_run(client: redis.Redis) -> None:
    """A cronlock key of the wrong type fails that job only, with a clear error."""
    client.set(job_key(PREFIX, "bad"), "not a hash")
    errors: list[Any] = []
    ran: list[str] = []
    runner = CronRunner(
        client,
        prefix=PREFIX,
        clock=FakeClock(T0 + 0.001),
        on_error=lambda e, c: errors.append((e, c)),
    )
    runner.interval(seconds=10, key="bad")(lambda: ran.append("bad"))
    runner.interval(seconds=10, key="good")(lambda: ran.append("good"))
    runner.run_pending()
    assert ran == ["good"]
    ((error, context),) = errors
    assert type(error).__name__ == "CorruptStateError"
    assert context.key == "bad"
    assert "bad" in str(error)


class Recorder:
    """An observer that keeps what it is told."""

    def __init__(self) -> None:
        self.claims: list[tuple[str, str]] = []
        self.records: list[Any] = []

    def claimed(self, key: str, slot_ms: int, status: str, runner_id: str) -> None:
        self.claims.append((key, status))

    def run_finished(self, record: Any) -> None:
        self.records.append(record)


def test_observers_hear_claims_and_finished_runs(client: redis.Redis) -> None:
    """Observers get every claim reply and a RunRecord per run, with the error type on failure."""
    recorder = Recorder()
    clocks = [FakeClock(T0 + 0.001), FakeClock(T0 + 0.002)]
    runners = [
        CronRunner(client, prefix=PREFIX, clock=c, observers=[recorder], on_error=lambda e, c: None)
        for c in clocks
    ]
    for runner in runners:
        runner.interval(seconds=10, key="obs")(lambda: 1 / 0)
        runner.run_pending()
    assert sorted(recorder.claims) == [("obs", "done"), ("obs", "won")]
    (record,) = recorder.records
    assert record.status == "failed"
    assert record.error_type == "ZeroDivisionError"
    assert "1 / 0" in record.traceback
    assert record.slot.timestamp() == T0
    assert record.duration >= 0


def test_an_observer_that_raises_does_not_break_the_run(client: redis.Redis) -> None:
    """A failing observer is logged; the handler still runs and the slot is finished."""

    class Broken:
        def run_started(self, ctx: Any, started_at: Any) -> None:
            raise RuntimeError("observer bug")

    ran: list[int] = []
    runner = CronRunner(client, prefix=PREFIX, clock=FakeClock(T0 + 0.001), observers=[Broken()])
    runner.interval(seconds=10, key="ok")(lambda: ran.append(1))
    assert runner.run_pending() == 1
    assert ran == [1]
