"""Who is alive and which jobs exist: runner heartbeats and the job registry.

* ``P:runner:ID`` (string, JSON, ``EX`` `HEARTBEAT_TTL_S`): one per live runner,
  refreshed every ``poll_interval`` by its operations thread. A runner that dies stops
  refreshing it and disappears from ``Admin.runners()`` within the TTL.
* ``P:jobs`` (hash): job key -> JSON ``{"schedule", "spec", "task", "seen"}``, written by
  runners when they start and when their set of jobs changes. ``spec`` lets a process
  with no runner compute the next run. Entries are never removed automatically (a job
  deleted from the code stays listed until ``Admin.forget(key)``).
* ``P:pause-all``: while set, a job first written to the registry starts paused, so
  pause-all also covers jobs deployed after it.

Nothing here is on the claim path: the registry is written at start and on change,
the heartbeat once per ``poll_interval``.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Optional

from cronlock._jsonable import jsonable
from cronlock._version import __version__
from cronlock.context import ms_to_datetime
from cronlock.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from cronlock.schedules._cronzone import zone_key

if TYPE_CHECKING:
    from cronlock.job import Job

HEARTBEAT_TTL_S = 30


def schedule_spec(schedule: Schedule, key: str) -> Optional[dict[str, Any]]:
    """A JSON-able description from which `schedule_from_spec` rebuilds ``schedule``."""
    if isinstance(schedule, IntervalSchedule):
        return {"interval_ms": schedule.period_ms, "offset_ms": schedule.offset_ms}
    if isinstance(schedule, CronSchedule):
        return {
            "cron": schedule.expression,
            "timezone": zone_key(schedule.timezone),
            "dst_fold": schedule.dst_fold,
            "hash_id": key,
        }
    if isinstance(schedule, OnceSchedule):
        return {"once_ms": schedule.next_after(-(2**62))}
    return None


def schedule_from_spec(spec: Any) -> Optional[Schedule]:
    """The schedule a spec describes; None when there is none or it no longer parses."""
    if not isinstance(spec, dict):
        return None
    try:
        if "interval_ms" in spec:
            return IntervalSchedule(spec["interval_ms"] / 1000, offset=spec["offset_ms"] / 1000)
        if "cron" in spec:
            return CronSchedule(
                spec["cron"],
                timezone=spec["timezone"],
                dst_fold=spec["dst_fold"],
                hash_id=spec["hash_id"],
            )
        if "once_ms" in spec:
            return OnceSchedule(spec["once_ms"] / 1000)
    except (ValueError, TypeError, KeyError):
        return None
    return None


def registry_entries(
    jobs: Sequence[Job], task_of: Callable[[str], Optional[str]], now_ms: int
) -> dict[str, str]:
    """Job key -> registry JSON for every job of a runner."""
    out = {}
    for job in jobs:
        out[job.key] = json.dumps(
            {
                "schedule": job.schedule.describe(),
                "spec": schedule_spec(job.schedule, job.key),
                "task": task_of(job.key),
                "seen": now_ms,
            },
            sort_keys=True,
        )
    return out


HEARTBEAT_JOBS_MAX = 1000


def heartbeat_json(
    *,
    runner_id: str,
    holder: str,
    jobs: Sequence[Job],
    tasks: Sequence[str],
    started_ms: int,
    now_ms: int,
    last_tick: Optional[datetime],
) -> str:
    """What a runner's heartbeat holds."""
    count = len(jobs)
    return json.dumps(
        {
            "id": runner_id,
            "holder": holder,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": __version__,
            # The full list only for modest runners: a heartbeat every few seconds must
            # not serialise 100,000 keys (the job registry P:jobs has them all).
            "jobs": sorted(job.key for job in jobs) if count <= HEARTBEAT_JOBS_MAX else [],
            "job_count": count,
            "tasks": sorted(tasks),
            "started": started_ms,
            "heartbeat": now_ms,
            "last_tick": None if last_tick is None else round(last_tick.timestamp() * 1000),
        },
        sort_keys=True,
    )


@dataclass(frozen=True)
class RunnerInfo:
    """A live runner, from its heartbeat key.

    Attributes:
        id: the runner id (``runner.runner_id``).
        holder: ``"host:pid:id"``, as history and job state name it.
        host, pid, version: where it runs, which cronlock.
        jobs: the job keys it has registered (code and dynamic); empty when it has more
            than `HEARTBEAT_JOBS_MAX` (then only ``job_count`` says how many).
        job_count: how many jobs it has.
        tasks: the task names it has handlers for.
        started: when its operations thread started.
        heartbeat: its last heartbeat.
        last_tick: when its scheduler last processed due slots (None: not yet).
        ttl: seconds until its heartbeat key expires.
    """

    id: str
    holder: str
    host: str
    pid: int
    version: str
    jobs: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    started: Optional[datetime] = None
    heartbeat: Optional[datetime] = None
    last_tick: Optional[datetime] = None
    ttl: Optional[float] = field(default=None, compare=False)
    job_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields (datetimes as ISO-8601)."""
        return jsonable(self)


def _ms(value: Any) -> Optional[datetime]:
    return ms_to_datetime(int(value)) if isinstance(value, (int, float)) else None


def parse_heartbeat(value: str, ttl: Optional[float]) -> Optional[RunnerInfo]:
    """The runner a heartbeat describes; None when it is not a heartbeat we wrote."""
    try:
        d = json.loads(value)
        return RunnerInfo(
            id=str(d["id"]),
            holder=str(d.get("holder", "")),
            host=str(d.get("host", "")),
            pid=int(d.get("pid", 0)),
            version=str(d.get("version", "")),
            jobs=tuple(d.get("jobs", ())),
            job_count=int(d.get("job_count", len(d.get("jobs", ())))),
            tasks=tuple(d.get("tasks", ())),
            started=_ms(d.get("started")),
            heartbeat=_ms(d.get("heartbeat")),
            last_tick=_ms(d.get("last_tick")),
            ttl=ttl,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def heartbeat_ttl(poll_interval: float) -> int:
    """Seconds a heartbeat lives: it outlives three missed syncs."""
    return max(HEARTBEAT_TTL_S, round(3 * poll_interval))
