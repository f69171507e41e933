"""Moving a fleet between stores: `copy_decisions` carries what operators decided."""

from __future__ import annotations

import json
from pathlib import Path

from cronlock import Admin, CronRunner, FakeClock
from cronlock.stores import SqliteStore, Store
from cronlock.stores.moving import copy_decisions

T0 = 1_800_000_000.0


def test_schedules_pauses_and_pause_all_reach_the_new_store(store: Store, tmp_path: Path) -> None:
    """From a SQLite file to every store: the schedule, the paused job and pause-all
    arrive; the jobs nobody paused stay runnable; a second copy changes nothing."""
    old = SqliteStore(tmp_path / "old.db", prefix=store.prefix)
    old.register_jobs({"a": "{}", "b": "{}"})
    old.pause("a")
    old.put_schedule("s1", json.dumps({"cron": "*/5 * * * *", "task": "t"}))
    old.pause_all(["a", "b"])
    old.resume("b")

    copied = copy_decisions(old, store)
    assert (copied.schedules, copied.paused, copied.pause_all) == (1, ("a",), True)
    assert store.schedules() == old.schedules()
    assert store.pause_all_active()
    [a, b] = store.job_states(["a", "b"])
    assert a.fields.get("paused") == "1"
    assert "paused" not in b.fields
    assert copy_decisions(old, store) == copied


def test_a_runner_on_the_new_store_obeys_the_copied_pause(store: Store, tmp_path: Path) -> None:
    old = SqliteStore(tmp_path / "old.db", prefix=store.prefix)
    old.register_jobs({"job": "{}"})
    old.pause("job")
    copy_decisions(old, store)
    ran: list[int] = []
    runner = CronRunner(store, clock=FakeClock(T0 + 0.001))
    runner.interval(seconds=10, key="job")(lambda: ran.append(1))
    assert runner.run_pending() == 0
    assert ran == []
    Admin(store).resume("job")
    runner.clock.set(T0 + 10.001)  # type: ignore[attr-defined]
    assert runner.run_pending() == 1
