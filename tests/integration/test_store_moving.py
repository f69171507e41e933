"""Moving a fleet between stores: `copy_decisions` carries what operators decided."""

from __future__ import annotations

import json
from pathlib import Path

from cronlock import Admin, CronRunner, FakeClock
from cronlock.stores import SqliteStore, Store
from cronlock.stores.moving import copy_decisions

T0 = 1_800_000_000.0


def test_schedules_pauses_and_pause_all_reach_the_new_store(store: Store, tmp_path: Path) -> None:
    """From a SQLite file to every store: the registry, the schedule, the paused job and
    pause-all arrive; the jobs nobody paused stay runnable; a second copy changes nothing."""
    old = SqliteStore(tmp_path / "old.db", prefix=store.prefix)
    old.register_jobs({"a": "{}", "b": "{}"})
    old.pause("a")
    old.put_schedule("s1", json.dumps({"cron": "*/5 * * * *", "task": "t"}))
    old.pause_all(["a", "b"])
    old.resume("b")

    copied = copy_decisions(old, store)
    assert (copied.jobs, copied.schedules, copied.paused, copied.pause_all) == (2, 1, ("a",), True)
    assert set(store.registry()) == {"a", "b"}
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


def test_the_documented_move_runs_no_slot_twice(store: Store, tmp_path: Path) -> None:
    """docs/stores.md's steps: copy, pause the new store, start the new replica while the
    old one runs, stop the old one, resume: each slot ran once, the copied pause holds."""
    old = SqliteStore(tmp_path / "old.db", prefix=store.prefix)
    clock = FakeClock(T0 + 0.001)
    runs: list[tuple[str, str, int]] = []

    def replica(on: Store, name: str) -> CronRunner:
        runner = CronRunner(on, clock=clock)
        for key in ("job", "held"):
            runner.interval(seconds=10, key=key)(
                lambda ctx: runs.append((name, ctx.key, ctx.slot_ms))
            )
        return runner

    before = replica(old, "old")
    before.sync()  # what a started runner does at once: registers its jobs
    before.run_pending()
    Admin(old).pause("held")
    copied = copy_decisions(old, store)
    assert Admin(store).pause_all() == 2  # the copied registry: every job, before any replica
    after = replica(store, "new")
    after.sync()
    for step in range(1, 3):  # both replicas up: only the old one runs
        clock.set(T0 + step * 10 + 0.001)
        before.run_pending()
        after.run_pending()
    Admin(store).resume_all()
    for key in copied.paused:
        Admin(store).pause(key)
    for step in range(3, 5):  # the old replica is gone
        clock.set(T0 + step * 10 + 0.001)
        after.run_pending()
    job = [(name, slot) for name, key, slot in runs if key == "job"]
    assert [slot for _, slot in job] == [int((T0 + i * 10) * 1000) for i in range(5)]
    assert [name for name, _ in job] == ["old", "old", "old", "new", "new"]
    assert [(name, key) for name, key, _ in runs if key == "held"] == [("old", "held")]
