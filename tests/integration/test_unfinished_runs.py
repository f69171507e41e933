"""Runs that end without a finish are recorded, counted and reported, never lost silently.

A crashed owner leaves a ``running`` entry and a lease that lapses. Whoever's claim finds
it records how it ended (``abandoned`` after ``max_attempts``; ``expired`` or
``abandoned`` when a newer slot starts first), counts it as a failure and hands a
`RunAbandoned` to ``on_error`` (phase ``"abandoned"``). The crashed runs are made with
the claim script itself (an owner that claims and never renews), the claiming replica
is a runner stepped with ``run_pending`` on a fake clock.
"""

from __future__ import annotations

from typing import Any

import prometheus_client
import redis

from cronlock import Admin, CronRunner, FakeClock, JobContext, RunAbandoned
from cronlock._keys import job_key
from cronlock.context import ErrorContext
from cronlock.metrics import PrometheusMetrics
from cronlock.stores.redis.claims import ClaimRequest, HistoryOptions, claim, finish, renew
from cronlock.testing import wait_until

T0 = 1_800_000_000.0  # a multiple of 10 s
PREFIX = "t"
S0 = int(T0 * 1000)
S1 = S0 + 10_000
S2 = S0 + 20_000
STATE = job_key(PREFIX, "job")
HISTORY = HistoryOptions(f"{PREFIX}:history:{{job}}", 100)


def _lapsed(client: redis.Redis, until_ms: int) -> bool:
    now_s, now_us = client.time()
    return until_ms < now_s * 1000 + now_us // 1000


def _ms(when: Any) -> int:
    return round(when.timestamp() * 1000)


def _runner(
    client: redis.Redis, at: float, overlap: str, errors: list[Any], **kw: Any
) -> tuple[CronRunner, list[Any]]:
    max_attempts = kw.pop("max_attempts", 3)
    """A runner at ``at`` with one 10 s job that records what it saw of the job's state."""
    runner = CronRunner(
        client,
        prefix=PREFIX,
        clock=FakeClock(at),
        default_ttl=5,
        on_error=lambda e, c: errors.append((e, c)),
        **kw,
    )
    seen: list[Any] = []

    @runner.interval(seconds=10, key="job", catch_up=3, overlap=overlap, max_attempts=max_attempts)
    def job(ctx: JobContext) -> None:
        failures = client.hget(STATE, "failures")
        seen.append((ctx.slot_ms, ctx.attempt, int(failures or 0)))

    return runner, seen


def _abandoned(errors: list[Any]) -> list[tuple[int, int]]:
    out = []
    for error, context in errors:
        assert isinstance(error, RunAbandoned), error
        assert isinstance(context, ErrorContext)
        assert context.phase == "abandoned"
        assert context.key == "job"
        out.append((context.slot_ms, context.attempt))
    return out


def test_a_crashed_run_kept_under_overlap_allow_is_recorded_as_abandoned(
    client: redis.Redis,
) -> None:
    """overlap "allow": an older run that crashed after a newer slot started is recorded
    ``abandoned`` by the next slot's claim, counted as a failure and given to on_error;
    the live older run beside it keeps renewing and finishes."""
    dead = claim(client, ClaimRequest(STATE, S0, "dead", 400, 3, "allow", "h:1:dead", HISTORY))
    alive = claim(
        client, ClaimRequest(STATE, S1, "alive", 60_000, 3, "allow", "h:2:alive", HISTORY)
    )
    assert (dead.status, alive.status) == ("won", "won")
    assert client.hexists(STATE, "r:dead")  # "dead" moved aside, still within its lease
    wait_until(lambda: _lapsed(client, dead.lease_until_ms), timeout=5)

    errors: list[Any] = []
    runner, seen = _runner(client, T0 + 20.001, "allow", errors)
    assert runner.run_pending() == 1
    assert seen == [(S2, 1, 1)]  # the abandoned run counted as a failure
    assert _abandoned(errors) == [(S0, 1)]
    assert runner.statistics().runs_abandoned == 1
    assert not client.hexists(STATE, "r:dead")

    entries = Admin(client, prefix=PREFIX).history("job")
    gone = [e for e in entries if e.event == "abandoned"]
    assert [(_ms(e.slot), e.attempt, e.fencing_token, e.holder) for e in gone] == [
        (S0, 1, dead.fence, "h:1:dead")
    ]
    # the older live run, moved aside now, keeps its fields across a renewal and finishes
    assert renew(client, STATE, S1, "alive", 60_000) is not None
    kept = client.hget(STATE, "r:alive")
    assert kept is not None
    text = kept if isinstance(kept, str) else kept.decode()
    assert text.startswith(f"{S1}:1:{alive.fence}:h:2:alive:")
    assert finish(client, STATE, S1, "alive", "done")
    assert not client.hexists(STATE, "r:alive")


def test_a_triggered_run_that_crashed_is_recorded_as_abandoned(client: redis.Redis) -> None:
    """A triggered run's field ("slot:lease") whose lease lapsed is recorded too (manual)."""
    client.hset(STATE, mapping={"slot": S0, "status": "done", "r:manual-owner": f"{S0}:1"})
    errors: list[Any] = []
    runner, seen = _runner(client, T0 + 10.001, "skip", errors)
    assert runner.run_pending() == 1
    assert seen == [(S1, 1, 1)]
    assert _abandoned(errors) == [(S0, 1)]
    gone = [e for e in Admin(client, prefix=PREFIX).history("job") if e.event == "abandoned"]
    assert [(e.kind, e.attempt) for e in gone] == [("manual", 1)]


def test_a_run_that_never_finished_before_the_next_slot_is_recorded_expired(
    client: redis.Redis,
) -> None:
    """The latest run's lease lapsed and the next slot came first: ``expired`` in the
    history, a failure, and on_error told (before, the run vanished with no trace)."""
    dead = claim(client, ClaimRequest(STATE, S0, "dead", 200, 3, "skip", "h:1:dead", HISTORY))
    wait_until(lambda: _lapsed(client, dead.lease_until_ms), timeout=5)
    errors: list[Any] = []
    runner, seen = _runner(client, T0 + 10.001, "skip", errors)
    assert runner.run_pending() == 1
    assert seen == [(S1, 1, 1)]
    assert _abandoned(errors) == [(S0, 1)]
    expired = [e for e in Admin(client, prefix=PREFIX).history("job") if e.event == "expired"]
    assert [(e.attempt, e.fencing_token, e.holder) for e in expired] == [
        (1, dead.fence, "h:1:dead")
    ]
    assert runner.statistics().runs_abandoned == 1


def test_a_slot_abandoned_after_max_attempts_calls_on_error_and_is_counted(
    client: redis.Redis,
) -> None:
    """The claim that finds the last attempt's lease lapsed reports the abandoned slot:
    on_error (phase "abandoned"), slots_failed, and the abandoned metric."""
    for owner in ("o1", "o2"):
        won = claim(client, ClaimRequest(STATE, S0, owner, 1, 2, "skip", "x"))
        assert won.status == "won"
        wait_until(lambda: _lapsed(client, int(client.hget(STATE, "lease") or 0)), timeout=5)
    registry = prometheus_client.CollectorRegistry()
    errors: list[Any] = []
    runner, seen = _runner(
        client,
        T0 + 0.001,
        "skip",
        errors,
        observers=[PrometheusMetrics(registry)],
        max_attempts=2,
    )
    assert runner.run_pending() == 0
    assert seen == []
    assert _abandoned(errors) == [(S0, 2)]
    assert runner.statistics().slots_failed == 1
    sample = registry.get_sample_value(
        "cronlock_abandoned_total", {"job": "job", "reason": "max_attempts"}
    )
    assert sample == 1
    assert Admin(client, prefix=PREFIX).job("job").consecutive_failures == 1
