"""Dynamic schedules: validated on write, picked up by runners with the task, reported
by runners without it."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from cronlock import Admin, ConfigurationError, CronRunner, ErrorContext, FakeClock, JobContext
from cronlock.testing import wait_until

T0 = 1_800_000_000.0  # a multiple of 60 s
PREFIX = "d"


def worker(client: redis.Redis, seen: list[Any], **kw: Any) -> CronRunner:
    """A runner with the task "reindex", recording (schedule id, payload, slot)."""
    kw.setdefault("clock", FakeClock(T0 - 1))
    runner = CronRunner(client, prefix=PREFIX, **kw)

    @runner.task("reindex")
    def reindex(ctx: JobContext) -> None:
        seen.append((ctx.key, ctx.payload, ctx.slot_ms))

    return runner


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cron": "61 * * * *"}, "61"),
        ({"cron": "* * * * *", "interval": 5}, "exactly one"),
        ({}, "exactly one"),
        ({"interval": 0}, "interval"),
        ({"interval": 5, "overlap": "sometimes"}, "overlap"),
        ({"interval": 5, "ttl": -1}, "ttl"),
        ({"interval": 5, "payload": {1, 2}}, "JSON"),
        ({"interval": 5, "colour": "red"}, "colour"),
        ({"interval": 5, "schedule_id": "a{b}"}, "braces"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "Mars"),
    ],
    ids=["bad-cron", "both", "neither", "zero", "overlap", "ttl", "payload", "option", "id", "tz"],
)
def test_add_schedule_validates_like_code_registration(
    client: redis.Redis, kwargs: dict[str, Any], match: str
) -> None:
    """Invalid schedules raise ConfigurationError before anything is stored."""
    admin = Admin(client, PREFIX)
    with pytest.raises(ConfigurationError, match=match):
        admin.add_schedule("reindex", **kwargs)
    assert admin.list_schedules() == []


def test_a_schedule_runs_with_its_payload_and_goes_away_when_removed(client: redis.Redis) -> None:
    """sync() builds the job; run_pending runs it with ctx.payload; removal destroys it."""
    seen: list[Any] = []
    runner = worker(client, seen)
    admin = Admin(client, PREFIX)
    spec = admin.add_schedule(
        "reindex", interval=60, payload={"index": "users"}, ttl=30, schedule_id="users"
    )
    assert [s.id for s in admin.list_schedules()] == ["users"]
    assert spec.describe() == "every 1 min on the UTC grid"
    runner.sync()
    assert runner.job("users").options.ttl_ms == 30_000
    runner.run_pending(T0 + 0.001)
    assert seen == [("users", {"index": "users"}, int(T0 * 1000))]
    status = admin.job("users")
    assert status.task == "reindex"
    assert status.schedule == "every 1 min on the UTC grid"
    assert admin.remove_schedule("users") is True
    assert admin.remove_schedule("users") is False
    runner.sync()
    with pytest.raises(KeyError):
        runner.job("users")
    runner.run_pending(T0 + 60.001)
    assert len(seen) == 1


def test_a_changed_schedule_replaces_the_job(client: redis.Redis) -> None:
    """Adding again under the same id replaces the spec; the runner rebuilds the job."""
    seen: list[Any] = []
    runner = worker(client, seen)
    admin = Admin(client, PREFIX)
    admin.add_schedule("reindex", interval=60, payload=1, schedule_id="x")
    runner.sync()
    admin.add_schedule("reindex", cron="*/5 * * * *", payload=2, schedule_id="x")
    runner.sync()
    assert "cron" in runner.job("x").schedule.describe()
    assert runner.job("x").options.payload == 2


def test_a_runner_without_the_handler_reports_it(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """No handler for the task: a WARNING, on_error once, health warnings; never silent."""
    errors: list[tuple[BaseException, ErrorContext]] = []
    runner = CronRunner(client, prefix=PREFIX, on_error=lambda e, c: errors.append((e, c)))
    Admin(client, PREFIX).add_schedule("reindex", interval=60, schedule_id="orphan")
    with caplog.at_level(logging.WARNING, logger="cronlock"):
        runner.sync()
        runner.sync()
    assert len(errors) == 1
    assert isinstance(errors[0][0], ConfigurationError)
    assert errors[0][1].key == "orphan"
    assert "no handler" in caplog.text
    assert runner.tasks.unhandled == {"orphan": "reindex"}
    assert any("orphan" in w for w in runner.health().warnings)


def test_a_schedule_id_that_collides_with_a_code_job_is_reported(client: redis.Redis) -> None:
    """The code job keeps its key; the dynamic schedule is reported, not merged."""
    errors: list[Any] = []
    seen: list[Any] = []
    runner = worker(client, seen, on_error=lambda e, c: errors.append(e))
    runner.interval(seconds=60, key="users")(lambda: None)
    Admin(client, PREFIX).add_schedule("reindex", interval=60, schedule_id="users")
    runner.sync()
    assert len(errors) == 1
    assert "already registered" in str(errors[0])


def test_started_runners_pick_up_a_new_schedule_and_run_it_once(client: redis.Redis) -> None:
    """Two started runners (polling at 60 s): pub/sub brings the schedule; one slot, one run."""
    seen: list[Any] = []
    fleet = [worker(client, seen, clock=None, poll_interval=60) for _ in range(2)]
    for r in fleet:
        r.start()
    try:
        wait_until(lambda: all(r._ops.listening for r in fleet))
        Admin(client, PREFIX).add_schedule("reindex", interval=1, schedule_id="fast")
        wait_until(lambda: all("fast" in [j.key for j in r.jobs] for r in fleet), timeout=10)
        wait_until(lambda: len(seen) >= 2, timeout=10)
    finally:
        for r in fleet:
            r.stop(timeout=5)
    slots = [s for _, _, s in seen]
    assert len(slots) == len(set(slots))
