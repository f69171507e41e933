"""Check a recorded history of replica runs against what cronlock promises.

Input: the JSONL records every replica wrote (``tests/replica.py``: ``claim``,
``renew``, ``start``, ``end``, ``finish``, ``error``), the jobs, the window of slots
to account for, and the faults the test injected (with when and to whom).

Per job, the checker verifies:

1. **Mutual exclusion while a lease is valid**: no two runs of one slot overlap in time
   while both held a valid lease. A run's lease is valid from its start until the
   earliest of: its end, the kill of its process, the last lease deadline Redis gave it
   (claim or renewal), an empty restart of Redis (which forgets every lease).
2. **Each completed slot completed once**: at most one ``finish`` with outcome done was
   accepted per slot. Handlers that ran to the end twice (a frozen owner woken after a
   takeover) are counted apart as ``dup_effects``: that is the gap fencing closes.
3. **Every slot in the window ran, or is explained**: by an injected outage around it,
   by the previous run still holding a live lease (overlap ``skip``), or by
   ``max_attempts`` exhausted.
4. **Fencing tokens increase in claim order** (claims ordered by Redis time), within
   each epoch of Redis state (an empty restart starts the counters again).
5. **Takeover delay** after an owner's death (kill -9, SIGSTOP) is at most
   ``lease + heartbeat + margin``.

It builds one row of the table that ``tests/faults`` prints and writes to
``test-artifacts/faults-table.txt``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

from tests.history import History

TOLERANCE_S = 0.005  # Redis TIME and time.time() are one clock here, rounded to 1 ms
BUSY_SLACK_S = 0.25  # a run's end record precedes its finish by a round trip or so


@dataclass(frozen=True)
class JobSpec:
    """What a replica was told: ``name:interval:duration:ttl``."""

    name: str
    interval: float
    duration: float
    ttl: float

    @classmethod
    def parse(cls, spec: str) -> JobSpec:
        name, interval, duration, ttl = spec.split(":")
        return cls(name, float(interval), float(duration), float(ttl))


@dataclass(frozen=True)
class Fault:
    """An injected fault.

    kinds: ``kill`` (pid, at), ``stop`` (pid, at .. until: SIGSTOP then SIGCONT),
    ``outage`` (at .. until; pid None = every replica cannot reach Redis),
    ``reset`` (at: Redis state lost - empty restart, failover that lost writes),
    ``lost-reply`` (at: a claim reached Redis, its reply did not reach the replica).
    """

    kind: str
    at: float
    until: Optional[float] = None
    pid: Optional[int] = None


@dataclass
class Run:
    """One handler call, joined with the lease records of its claim."""

    pid: int
    job: str
    slot: int
    attempt: int
    fence: int
    start: float
    end: Optional[float] = None
    outcome: Optional[str] = None
    owner: Optional[str] = None
    claimed_ms: Optional[int] = None  # Redis time of the winning claim
    lease_end: float = math.inf  # last lease deadline Redis granted (s)
    valid_until: float = math.inf


@dataclass
class Report:
    """The verdict for one scenario, and its row of the table."""

    scenario: str
    slots: int = 0
    runs: int = 0
    completed: int = 0
    dup_completions: list[Any] = field(default_factory=list)
    dup_effects: list[Any] = field(default_factory=list)
    overlaps: list[Any] = field(default_factory=list)
    missed: list[Any] = field(default_factory=list)
    explained: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    fence_violations: list[Any] = field(default_factory=list)
    takeovers: int = 0
    takeover_delays: list[float] = field(default_factory=list)
    takeover_bound: float = math.inf
    late_takeovers: list[Any] = field(default_factory=list)
    cancel_lags: list[float] = field(default_factory=list)
    recoveries: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def assert_guarantees(self, *, allow_missed: int = 0, allow_dup: int = 0) -> None:
        """Fail with the evidence if a promise was broken."""
        assert not self.overlaps, (
            f"{self.scenario}: runs overlapped under valid leases: {self.overlaps}"
        )
        assert len(self.dup_completions) <= allow_dup, (
            f"{self.scenario}: slots completed twice: {self.dup_completions}"
        )
        assert not self.fence_violations, (
            f"{self.scenario}: fences out of order: {self.fence_violations}"
        )
        assert len(self.missed) <= allow_missed, (
            f"{self.scenario}: unexplained misses: {self.missed}"
        )
        late = [d for d in self.takeover_delays if d > self.takeover_bound]
        assert not late, (
            f"{self.scenario}: takeovers slower than {self.takeover_bound:.2f} s: {late}"
        )

    @staticmethod
    def header() -> str:
        return (
            f"{'scenario':<28} {'slots':>5} {'runs':>5} {'done':>5} {'dup':>4} {'dupfx':>5} "
            f"{'ovl':>4} {'miss':>4} {'expl':>5} {'tkov':>4} {'p50 s':>6} {'p99 s':>6} "
            f"{'max s':>6} {'bound':>6} {'cancel':>6} {'recov':>6}"
        )

    def row(self) -> str:
        def q(p: float) -> str:
            if not self.takeover_delays:
                return "-"
            xs = sorted(self.takeover_delays)
            return f"{xs[min(len(xs) - 1, math.ceil(p * len(xs)) - 1)]:.2f}"

        bound = "-" if math.isinf(self.takeover_bound) else f"{self.takeover_bound:.2f}"
        lag = f"{max(self.cancel_lags):.2f}" if self.cancel_lags else "-"
        rec = f"{max(self.recoveries):.2f}" if self.recoveries else "-"
        return (
            f"{self.scenario:<28} {self.slots:>5} {self.runs:>5} {self.completed:>5} "
            f"{len(self.dup_completions):>4} {len(self.dup_effects):>5} {len(self.overlaps):>4} "
            f"{len(self.missed):>4} {sum(self.explained.values()):>5} {self.takeovers:>4} "
            f"{q(0.5):>6} {q(0.99):>6} {q(1.0):>6} {bound:>6} {lag:>6} {rec:>6}"
        )


def _runs(history: History) -> list[Run]:
    claims: dict[tuple[int, str, int, int], dict[str, Any]] = {}
    renewals: dict[tuple[int, str, int, str], int] = defaultdict(int)
    for r in history.records:
        if r["event"] == "claim":
            claims[(r["pid"], r["job"], r["slot"], r["fence"])] = r
        elif r["event"] == "renew":
            key = (r["pid"], r["job"], r["slot"], r["owner"])
            renewals[key] = max(renewals[key], r["lease"])
    runs: list[Run] = []
    open_runs: dict[tuple[int, str, int, int], Run] = {}
    for r in history.records:
        key = (r.get("pid", 0), r.get("job", ""), r.get("slot", 0), r.get("fence", 0))
        if r["event"] == "start":
            run = Run(r["pid"], r["job"], r["slot"], r["attempt"], r["fence"], r["t"])
            claim = claims.get(key)
            if claim is not None:
                run.owner = claim["owner"]
                run.claimed_ms = claim["lease"] - claim["lease_ms"]
                granted = max(claim["lease"], renewals.get((*key[:3], claim["owner"]), 0))
                run.lease_end = granted / 1000
            runs.append(run)
            open_runs[key] = run
        elif r["event"] == "end" and key in open_runs:
            run = open_runs.pop(key)
            run.end, run.outcome = r["t"], r["outcome"]
    return runs


def check(
    scenario: str,
    history: History,
    jobs: list[JobSpec],
    window: tuple[float, float],
    faults: tuple[Fault, ...] = (),
    *,
    max_attempts: int = 3,
    margin: float = 1.5,
    slack: float = 1.5,
    recovery: float = 5.0,
) -> Report:
    """Check ``history`` for ``jobs`` over slots in ``window`` (epoch s, inclusive).

    ``slack``: a slot this close to a fault is explained by it; ``recovery``: after an
    outage ends, slots within this long are explained too (the client's own retries and
    back-off can hold a runner thread after Redis answers again; the measured recovery
    is in the table).
    """
    report = Report(scenario)
    runs = _runs(history)
    for f in faults:
        if f.kind == "outage" and f.until is not None:
            after = [r.start for r in runs if r.start > f.until]
            if after:
                report.recoveries.append(min(after) - f.until)
    resets = sorted(f.at for f in faults if f.kind == "reset")
    _set_validity(report, runs, faults, resets)
    finishes: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in history.events("finish"):
        if r["ok"] and r["outcome"] == "done":
            finishes[(r["job"], r["slot"])].append(r)
    for spec in jobs:
        job_runs = [r for r in runs if r.job == spec.name]
        report.runs += len(job_runs)
        by_slot: dict[int, list[Run]] = defaultdict(list)
        for run in job_runs:
            by_slot[run.slot].append(run)
        _check_exclusion(report, spec, by_slot)
        for (job, slot), accepted in finishes.items():
            if job == spec.name:
                report.completed += 1
                if len(accepted) > 1:
                    report.dup_completions.append((job, slot, [r["pid"] for r in accepted]))
        _check_slots(report, spec, job_runs, by_slot, window, faults, (slack, recovery))
        _check_fences(report, spec, job_runs, resets)
        bound = spec.ttl + spec.ttl / 3 + margin
        _check_takeovers(report, spec, job_runs, by_slot, faults, bound, max_attempts)
    return report


def _set_validity(
    report: Report, runs: list[Run], faults: tuple[Fault, ...], resets: list[float]
) -> None:
    """When each run's lease stopped being valid (and how late cancelled runs noticed)."""
    kills = {f.pid: f.at for f in faults if f.kind == "kill"}
    for run in runs:
        ends = [run.lease_end]
        if run.end is not None:
            ends.append(run.end)
        if run.pid in kills and kills[run.pid] >= run.start:
            ends.append(kills[run.pid])
        ends += [t for t in resets if t >= run.start]
        run.valid_until = min(ends)
        lease_lapsed = run.end is not None and run.end > run.lease_end
        if run.outcome == "cancelled" and lease_lapsed and run.end is not None:
            report.cancel_lags.append(run.end - run.lease_end)


def _check_exclusion(report: Report, spec: JobSpec, by_slot: dict[int, list[Run]]) -> None:
    """1. no two runs of one slot overlap while both leases are valid; 2b. dup effects."""
    for slot, slot_runs in by_slot.items():
        for i, a in enumerate(slot_runs):
            for b in slot_runs[i + 1 :]:
                lo, hi = max(a.start, b.start), min(a.valid_until, b.valid_until)
                if hi - lo > TOLERANCE_S:
                    report.overlaps.append((spec.name, slot, a.pid, b.pid, round(hi - lo, 3)))
        done = [r for r in slot_runs if r.outcome == "done"]
        if len(done) > 1:
            report.dup_effects.append((spec.name, slot, [r.pid for r in done]))


def _check_slots(  # noqa: PLR0917 - private helper of check(), one call site
    report: Report,
    spec: JobSpec,
    job_runs: list[Run],
    by_slot: dict[int, list[Run]],
    window: tuple[float, float],
    faults: tuple[Fault, ...],
    slack: tuple[float, float],
) -> None:
    """3. every slot in the window ran, or is explained."""
    step = round(spec.interval * 1000)
    first = math.ceil(window[0] * 1000 / step) * step
    for slot in range(first, int(window[1] * 1000) + 1, step):
        report.slots += 1
        if slot in by_slot:
            continue
        reason = _explain(slot / 1000, spec, job_runs, faults, slack)
        if reason:
            report.explained[reason] += 1
        else:
            report.missed.append((spec.name, slot))


def _check_fences(report: Report, spec: JobSpec, job_runs: list[Run], resets: list[float]) -> None:
    """4. fencing tokens increase in claim order (Redis time), per epoch of Redis state."""
    ordered = sorted(
        (r for r in job_runs if r.claimed_ms is not None), key=lambda r: (r.claimed_ms, r.fence)
    )
    epochs: dict[int, list[Run]] = defaultdict(list)
    for run in ordered:
        epochs[sum(1 for t in resets if t * 1000 <= (run.claimed_ms or 0))].append(run)
    for epoch in epochs.values():
        for a, b in zip(epoch, epoch[1:]):
            if b.fence <= a.fence:
                report.fence_violations.append((spec.name, a.slot, a.fence, b.slot, b.fence))


def _check_takeovers(  # noqa: PLR0917 - private helper of check(), one call site
    report: Report,
    spec: JobSpec,
    job_runs: list[Run],
    by_slot: dict[int, list[Run]],
    faults: tuple[Fault, ...],
    bound: float,
    max_attempts: int,
) -> None:
    """5. after an owner's death (kill, stop), how long until another replica took over."""
    report.takeovers += sum(1 for r in job_runs if r.attempt > 1)
    for f in faults:
        if f.kind not in ("kill", "stop"):
            continue
        for run in job_runs:
            if run.pid != f.pid or run.start > f.at or (run.end is not None and run.end <= f.at):
                continue
            successors = [
                r.start
                for r in by_slot[run.slot]
                if r.attempt > run.attempt and r.start >= f.at and r.pid != f.pid
            ]
            if not successors and run.attempt >= max_attempts:
                report.explained["exhausted"] += 1  # at-least-once is bounded by max_attempts
            elif successors:
                delay = min(successors) - f.at
                report.takeover_delays.append(delay)
                report.takeover_bound = min(report.takeover_bound, bound)
                if delay > bound:
                    report.late_takeovers.append((spec.name, run.slot, round(delay, 3), bound))
            else:
                report.notes.append(f"{spec.name} slot {run.slot}: no takeover after {f.kind}")


def _explain(
    t: float, spec: JobSpec, runs: list[Run], faults: tuple[Fault, ...], slacks: tuple[float, float]
) -> str:
    """Why slot time ``t`` of ``spec`` may legitimately have no run ('' if it may not)."""
    slack, recovery = slacks
    for f in faults:
        until = f.until if f.until is not None else f.at
        if f.kind in ("outage", "reset") and f.at - slack <= t <= until + max(slack, recovery):
            return f.kind
        if f.kind == "lost-reply" and f.at - slack <= t <= f.at:
            return f.kind
        if f.kind in ("kill", "stop") and f.at - slack <= t <= until + spec.ttl + slack:
            # the owner of the previous slot died: its lease blocks new slots until it lapses
            return f.kind
    for run in runs:
        end = run.end if run.end is not None else run.valid_until
        if run.start - TOLERANCE_S <= t <= end + BUSY_SLACK_S and run.slot < t * 1000:
            return "busy"  # overlap "skip": the previous run still held its lease
    return ""
