"""How many claims a batch holds: one per idle worker, plus the short runs that fit the
budget (``cronlock.runner.slots.Budget``). Pure bookkeeping: no store, no threads."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional

from cronlock._stats import StatsCounter
from cronlock.runner.requests import spread
from cronlock.runner.slots import Budget, Entry, RunTimes, SlotQueue


def _entries(*busy_ms: Optional[float]) -> list[Entry]:
    options = SimpleNamespace(catch_up_ms=60_000, jitter_ms=0)
    jobs: list[Any] = [
        SimpleNamespace(key=f"j{i}", busy_ms=b, options=options) for i, b in enumerate(busy_ms)
    ]
    return [Entry(0, i, job, 0, 1000, "claim") for i, job in enumerate(jobs)]


def test_without_a_budget_a_batch_holds_one_claim_per_idle_worker() -> None:
    """Two workers, one running: one claim goes, the other four wait in the backlog."""
    queue = SlotQueue(StatsCounter(), max_workers=2)
    claims = _entries(1.0, 1.0, 1.0, 1.0, 1.0)
    assert queue.within_capacity(claims, running=1) == claims[:1]
    assert list(queue.backlog) == claims[1:]


def test_short_runs_that_fit_the_horizon_join_the_batch() -> None:
    """A 10 ms budget: beyond the idle worker, 4 ms + 4 ms fit and a third does not."""
    queue = SlotQueue(StatsCounter(), max_workers=1)
    claims = _entries(None, 4.0, 4.0, 4.0)
    assert queue.within_capacity(claims, 0, Budget(10)) == claims[:3]
    assert list(queue.backlog) == claims[3:]


def test_a_job_that_never_ran_here_ends_the_extension() -> None:
    """Before any run ended here, its run could keep a worker for any time: nothing
    behind it joins the batch."""
    assert Budget(10).fits(_entries(1.0, None, 1.0), idle=1) == 1
    assert Budget(10).fits(_entries(0.0, 0.0), idle=1) == 2  # a run costs at least MIN_RUN_MS


def test_only_idle_workers_take_on_more() -> None:
    """Two workers, one busy: the budget is one worker's; none idle: nothing is sent."""
    queue = SlotQueue(StatsCounter(), max_workers=2)
    claims = _entries(4.0, 4.0, 4.0, 4.0)
    assert queue.within_capacity(claims, 1, Budget(10)) == claims[:3]
    assert queue.within_capacity(_entries(1.0), 2, Budget(10)) == []


def test_the_backlog_is_drained_by_the_budget_too() -> None:
    """A freed worker takes its claim and the short ones that fit behind it."""
    queue = SlotQueue(StatsCounter(), max_workers=1)
    claims = _entries(1.0, 1.0, 1.0, 50.0, 1.0)
    queue.within_capacity(claims, running=1)  # no idle worker: all wait
    assert queue.from_backlog(0, 0, Budget(10)) == claims[:3]
    assert list(queue.backlog) == claims[3:]


def test_a_job_that_never_ran_here_costs_the_runners_longest_latest_run() -> None:
    """Once runs ended here, a new job is taken to cost the longest of the latest 32."""
    times = RunTimes()
    assert times.longest() is None
    for ms in (1.0, 4.0, 2.0):
        times.add(ms)
    budget = Budget(10, times.longest())
    assert budget.fits(_entries(None, None, None, None), idle=1) == 2  # 4 + 4, not a third
    assert budget.fits(_entries(1.0, None, 1.0, 1.0), idle=1) == 4


def test_only_the_latest_runs_count() -> None:
    times = RunTimes(keep=2)
    for ms in (500.0, 1.0, 2.0):
        times.add(ms)
    assert times.longest() == 2.0


def test_waiting_claims_can_be_taken_out_of_the_backlog_in_order() -> None:
    """The scheduler reads a fleet's waiting claims with the batch it reads anyway."""
    queue = SlotQueue(StatsCounter(), max_workers=1)
    claims = _entries(1.0, 1.0, 1.0, 1.0)
    queue.within_capacity(claims, running=0)  # one goes, three wait
    taken = queue.take_backlog(lambda entry: entry.job.key != "j2")
    assert taken == [claims[1], claims[3]]
    assert list(queue.backlog) == [claims[2]]
    assert queue.take_backlog(lambda entry: False) == []


def test_after_a_read_each_slots_claims_start_at_a_random_one_and_slots_keep_order() -> None:
    """Replicas that read the same free slots claim different ones first; a claim of an
    older slot (one that waited) still goes before the newer slot's."""
    options = SimpleNamespace(catch_up_ms=60_000, jitter_ms=0)
    jobs: list[Any] = [SimpleNamespace(key=f"j{i}", options=options) for i in range(6)]
    entries = [Entry(0, i, job, 0, 1000 if i < 2 else 2000, "claim") for i, job in enumerate(jobs)]
    firsts = set()
    for _ in range(200):
        out = spread(entries)
        assert sorted(e.seq for e in out[:2]) == [0, 1]  # the older slot first
        assert [e.seq for e in out[2:]] in ([2, 3, 4, 5], [3, 4, 5, 2], [4, 5, 2, 3], [5, 2, 3, 4])
        firsts.add(out[2].seq)
    assert firsts == {2, 3, 4, 5}
