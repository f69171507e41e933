"""A job's status as the operator side shows it, from its state and the runners' heartbeats."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from cronlock._jsonable import jsonable
from cronlock._registry import RunnerInfo, schedule_from_spec
from cronlock.context import ms_to_datetime

__all__ = ["FleetStatus", "JobStatus", "Liveness", "job_status"]


@dataclass(frozen=True)
class JobStatus:
    """What Redis knows of one job.

    Attributes:
        key: the job key.
        schedule: the schedule in words, from the registry (None if no runner registered it).
        task: the task name, for a dynamic schedule's job.
        registered: a runner has registered the job (it is in ``P:jobs``).
        paused: claims of the job are refused on every replica.
        status: the latest slot's ``"running"``, ``"done"`` or ``"failed"`` (None: never ran).
        slot, attempt, fencing_token: the latest slot claimed, its attempt, the last fence.
        holder, lease_until: for a running slot: who runs it and until when its lease holds.
        other_runs: other live runs (overlap ``allow`` or triggered runs).
        last_success, last_success_slot: when the last successful run ended, and its slot.
        last_failure, last_failure_slot, last_error: the same for the last failed run.
        consecutive_failures: failed slots since the last success (a dead man's switch).
        next_run: the next slot after now (None: unknown schedule, or none left).
        pending_triggers: manual runs requested and not yet taken by a replica.
        runners: live runners that have the job (from their heartbeats); None when a
            live runner has too many jobs to list them in its heartbeat.
        last_seen: when a runner last had it: the newest heartbeat of a live runner
            that has it, else when a runner last registered it. A job no live runner
            has is one whose runners are all gone (or that was deleted from the code).
    """

    key: str
    schedule: Optional[str] = None
    task: Optional[str] = None
    registered: bool = False
    paused: bool = False
    status: Optional[str] = None
    slot: Optional[datetime] = None
    attempt: int = 0
    fencing_token: int = 0
    holder: Optional[str] = None
    lease_until: Optional[datetime] = None
    other_runs: int = 0
    last_success: Optional[datetime] = None
    last_success_slot: Optional[datetime] = None
    last_failure: Optional[datetime] = None
    last_failure_slot: Optional[datetime] = None
    last_error: Optional[str] = None
    consecutive_failures: int = 0
    next_run: Optional[datetime] = None
    pending_triggers: int = 0
    runners: Optional[int] = None
    last_seen: Optional[datetime] = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields (datetimes as ISO-8601)."""
        return jsonable(self)


@dataclass(frozen=True)
class FleetStatus:
    """A summary for ``cronlock status``: counts over runners, jobs and schedules."""

    runners: int
    jobs: int
    paused: int
    running: int
    failing: int  # jobs whose latest run(s) failed (consecutive_failures > 0)
    schedules: int
    pause_all: bool

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _int(value: Optional[str]) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def _when(value: Optional[str]) -> Optional[datetime]:
    ms = _int(value)
    return ms_to_datetime(ms) if value else None


@dataclass(frozen=True)
class Liveness:
    """Which jobs the live runners have, from their heartbeats."""

    counts: dict[str, int]
    newest: dict[str, datetime]
    complete: bool  # every live runner listed its jobs (none had too many)

    @classmethod
    def of(cls, runners: list[RunnerInfo]) -> Liveness:
        counts: dict[str, int] = {}
        newest: dict[str, datetime] = {}
        complete = True
        for runner in runners:
            complete = complete and len(runner.jobs) >= runner.job_count
            for key in runner.jobs:
                counts[key] = counts.get(key, 0) + 1
                if runner.heartbeat is not None and (
                    key not in newest or runner.heartbeat > newest[key]
                ):
                    newest[key] = runner.heartbeat
        return cls(counts, newest, complete)

    def runners(self, key: str) -> Optional[int]:
        count = self.counts.get(key, 0)
        return count if count or self.complete else None


def job_status(
    key: str,
    st: dict[str, str],
    pending: int,
    entry: Optional[dict[str, Any]],
    *,
    now_ms: int,
    live: Liveness,
) -> JobStatus:
    """A job's status from its stored state, pending triggers and registry entry."""
    lease = _int(st.get("lease"))
    running = st.get("status") == "running"
    others = 0
    for field, value in st.items():
        if field.startswith("r:"):
            until = _int(value.rsplit(":", 1)[-1])
            others += until > now_ms
    schedule = schedule_from_spec((entry or {}).get("spec"))
    next_ms = schedule.next_after(now_ms) if schedule is not None else None
    return JobStatus(
        key=key,
        schedule=(entry or {}).get("schedule"),
        task=(entry or {}).get("task"),
        registered=entry is not None,
        paused=st.get("paused") == "1",
        status=st.get("status") or None,
        slot=_when(st.get("slot")),
        attempt=_int(st.get("attempt")),
        fencing_token=_int(st.get("fence")),
        holder=st.get("holder") if running else None,
        lease_until=ms_to_datetime(lease) if running and lease else None,
        other_runs=others,
        last_success=_when(st.get("done_at")),
        last_success_slot=_when(st.get("last_done")),
        last_failure=_when(st.get("failed_at")),
        last_failure_slot=_when(st.get("last_failed")),
        last_error=st.get("last_error") or None,
        consecutive_failures=_int(st.get("failures")),
        next_run=None if next_ms is None else ms_to_datetime(next_ms),
        pending_triggers=pending,
        runners=live.runners(key),
        last_seen=live.newest.get(key) or _when(str((entry or {}).get("seen") or "")),
    )
