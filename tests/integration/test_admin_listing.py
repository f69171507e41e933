"""What Admin lists: removed schedules leave, and each job says which runners have it
(issue: operator edges, C7). On every store."""

from __future__ import annotations

from cronlock import Admin, CronRunner, FakeClock, JobContext
from cronlock.stores import Store

T0 = 1_800_000_000.0


def _runner(store: Store) -> CronRunner:
    runner = CronRunner(store, clock=FakeClock(T0))

    @runner.interval(seconds=60, key="report")
    def report() -> None:
        pass

    @runner.task("reindex")
    def reindex(ctx: JobContext) -> None:
        pass

    return runner


def test_a_removed_schedule_is_not_listed_counted_or_paused(store: Store) -> None:
    """Its registry entry lingers (the runner registered it), but jobs(), status() and
    pause_all() leave it out."""
    runner = _runner(store)
    admin = Admin(store)
    spec = admin.add_schedule("reindex", interval=60)
    runner.sync()  # registers the schedule's job
    assert [j.key for j in admin.jobs()] == sorted(["report", spec.id])
    assert admin.remove_schedule(spec.id)
    runner.sync()  # drops the job locally; the registry entry stays
    assert store.registry_entry(spec.id) is not None
    assert [j.key for j in admin.jobs()] == ["report"]
    assert admin.status().jobs == 1
    assert admin.pause_all() == 1
    assert store.job_states([spec.id])[0].fields.get("paused") != "1"


def test_a_job_no_live_runner_has_says_when_one_last_did(store: Store) -> None:
    """runners 0 with no heartbeat, last_seen from when a runner registered it."""
    runner = _runner(store)
    runner.sync()
    [job] = Admin(store).jobs()
    assert job.runners == 0
    assert job.last_seen is not None
    assert job.last_seen.timestamp() == T0
    assert job.as_dict()["last_seen"].startswith("2027-01-15")
