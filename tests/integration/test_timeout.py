"""A job's ``timeout``: past it the run is cancelled and recorded as failed (JobTimeout).

Python cannot stop a thread, so the timeout is cooperative: ``ctx.cancelled`` and
``ctx.timed_out`` are set, ``ctx.check()`` raises ``JobTimeout``, and the lease is kept
until the handler returns, so no other replica runs the slot meanwhile. The runners are
stepped with ``run_pending`` on a fake clock; the timeout itself runs on real time (short).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from cronlock import Admin, CronRunner, FakeClock, IntervalSchedule, JobContext, JobTimeout
from cronlock._keys import job_key
from cronlock.context import ErrorContext
from cronlock.stores.redis.claims import ClaimRequest, claim

T0 = 1_800_000_000.0
SLOT_MS = int(T0 * 1000)


def _runner(client: redis.Redis, prefix: str, errors: list[Any]) -> CronRunner:
    return CronRunner(
        client,
        prefix=prefix,
        clock=FakeClock(T0 + 0.001),
        default_ttl=30,
        on_error=lambda e, c: errors.append((e, c)),
    )


def _history(client: redis.Redis, prefix: str) -> list[dict[str, str]]:
    entries = client.xrange(f"{prefix}:history:{{job}}")
    return [
        {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
         for k, v in fields.items()}
        for _, fields in entries
    ]  # fmt: skip


def test_a_handler_past_its_timeout_is_cancelled_and_recorded_failed(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The handler sees ctx.timed_out and ctx.check() raising JobTimeout; the run is failed."""
    prefix = f"to-a-{id(client)}"
    errors: list[tuple[BaseException, ErrorContext]] = []
    seen: list[Any] = []
    runner = _runner(client, prefix, errors)

    @runner.interval(seconds=10, key="job", timeout=0.2)
    def job(ctx: JobContext) -> None:
        seen.append(ctx.cancelled.wait(10))
        seen.append(ctx.timed_out.is_set())
        ctx.check()

    with caplog.at_level(logging.WARNING, logger="cronlock"):
        assert runner.run_pending() == 1
    assert seen == [True, True]
    [(error, context)] = errors
    assert isinstance(error, JobTimeout)
    assert "timeout of 0.2 s" in str(error)
    assert (context.key, context.phase) == ("job", "handler")
    assert "ran past its timeout" in caplog.text
    stats = runner.statistics()
    assert (stats.runs_timed_out, stats.runs_failed, stats.runs_succeeded) == (1, 1, 0)
    ended = _history(client, prefix)[-1]
    assert (ended["event"], ended["error_type"]) == ("failed", "JobTimeout")


def test_a_handler_that_ignores_the_timeout_keeps_its_lease_until_it_returns(
    client: redis.Redis,
) -> None:
    """Past the timeout, another replica's claim of the slot is still answered "taken";
    the run is failed even though the handler returned normally."""
    prefix = f"to-b-{id(client)}"
    errors: list[Any] = []
    answers: list[str] = []
    runner = _runner(client, prefix, errors)
    other = ClaimRequest(job_key(prefix, "job"), SLOT_MS, "other", 30_000, 3, "skip", "x")

    @runner.interval(seconds=10, key="job", timeout=0.1)
    def job(ctx: JobContext) -> None:
        ctx.timed_out.wait(10)  # ignores ctx.cancelled and goes on working
        answers.append(claim(client, other).status)

    assert runner.run_pending() == 1
    assert answers == ["taken"]
    assert [type(e) for e, _ in errors] == [JobTimeout]
    assert runner.statistics().runs_failed == 1


def test_a_run_within_its_timeout_succeeds(client: redis.Redis) -> None:
    """A handler that returns before its timeout is a success; the timeout never fires."""
    prefix = f"to-c-{id(client)}"
    errors: list[Any] = []
    contexts: list[JobContext] = []
    runner = _runner(client, prefix, errors)
    runner.add_job(contexts.append, IntervalSchedule(10), key="job", timeout=5)
    assert runner.run_pending() == 1
    assert errors == []
    assert not contexts[0].timed_out.is_set()
    assert runner.statistics().runs_succeeded == 1


def test_a_dynamic_schedule_takes_a_timeout(client: redis.Redis) -> None:
    """add_schedule(timeout=...) is validated like a code-registered job's and applied."""
    prefix = f"to-d-{id(client)}"
    admin = Admin(client, prefix)
    with pytest.raises(ValueError, match="timeout"):
        admin.add_schedule("reindex", interval=60, timeout=-1, schedule_id="bad")
    admin.add_schedule("reindex", interval=60, timeout=2.5, schedule_id="users")
    runner = _runner(client, prefix, [])
    runner.task("reindex")(lambda: None)
    runner.sync()
    assert runner.job("users").options.timeout_ms == 2500
