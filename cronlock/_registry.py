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
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Optional

from cronlock._jsonable import jsonable
from cronlock._keys import (
    ANY_RUNNER_PATTERN,
    job_key,
    job_registry_key,
    pause_all_key,
    runner_key,
    split_runner_key,
)
from cronlock._scripts import text
from cronlock._version import __version__
from cronlock.context import ms_to_datetime
from cronlock.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from cronlock.schedules._cronzone import zone_key

if TYPE_CHECKING:
    from cronlock.runner import CronRunner

HEARTBEAT_TTL_S = 30
SCAN_LIMIT = 10_000
#: `runner_prefixes` examines at most this many keys (SCAN COUNT 1000 per call) ...
PREFIX_SCAN_KEYS = 50_000
#: ... and reads at most this many candidate heartbeats.
PREFIX_SCAN_CANDIDATES = 200


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


def registry_entries(runner: CronRunner, now_ms: int) -> dict[str, str]:
    """Job key -> registry JSON for every job of ``runner``."""
    out = {}
    for job in runner.jobs:
        out[job.key] = json.dumps(
            {
                "schedule": job.schedule.describe(),
                "spec": schedule_spec(job.schedule, job.key),
                "task": runner.tasks.task_of(job.key),
                "seen": now_ms,
            },
            sort_keys=True,
        )
    return out


def register_jobs(client: Any, prefix: str, entries: dict[str, str]) -> list[str]:
    """Write ``entries`` to the registry; pause the new ones while pause-all is set.

    Two round trips (three when pause-all is set and a job is new). Returns the keys
    that were not in the registry before.
    """
    if not entries:
        return []
    registry = job_registry_key(prefix)
    pipe = client.pipeline(transaction=False)
    keys = sorted(entries)
    for key in keys:
        pipe.hsetnx(registry, key, entries[key])
    pipe.hset(registry, mapping=entries)
    pipe.get(pause_all_key(prefix))
    replies = pipe.execute()
    new = [key for key, created in zip(keys, replies) if created]
    if new and replies[-1] is not None:
        pipe = client.pipeline(transaction=False)
        for key in new:
            pipe.hset(job_key(prefix, key), "paused", "1")
        pipe.execute()
    return new


HEARTBEAT_JOBS_MAX = 1000


def heartbeat_json(runner: CronRunner, started_ms: int, now_ms: int) -> str:
    """What ``P:runner:ID`` holds for ``runner``."""
    last_tick = runner.statistics().last_tick
    count = len(runner._jobs)
    return json.dumps(
        {
            "id": runner.runner_id,
            "holder": runner.holder,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": __version__,
            # The full list only for modest runners: a heartbeat every few seconds must
            # not serialise 100,000 keys (the job registry P:jobs has them all).
            "jobs": sorted(job.key for job in runner.jobs) if count <= HEARTBEAT_JOBS_MAX else [],
            "job_count": count,
            "tasks": sorted(runner.tasks.names()),
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
        jobs: the job keys it has registered (code and dynamic).
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

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields (datetimes as ISO-8601)."""
        return jsonable(self)


def _ms(value: Any) -> Optional[datetime]:
    return ms_to_datetime(int(value)) if isinstance(value, (int, float)) else None


def runner_prefixes(client: Any) -> dict[str, int]:
    """Prefixes with live runners in this database, and how many each has.

    Bounded: one SCAN over at most `PREFIX_SCAN_KEYS` keys, reading at most
    `PREFIX_SCAN_CANDIDATES` heartbeats; on a larger keyspace the answer may be
    incomplete. A key counts only if it holds a heartbeat naming its own runner id,
    so another application's ``x:runner:y`` keys are not taken for runners.
    """
    candidates: list[tuple[str, str, str]] = []
    cursor: Any = 0
    examined = 0
    while examined < PREFIX_SCAN_KEYS and len(candidates) < PREFIX_SCAN_CANDIDATES:
        cursor, batch = client.scan(cursor, match=ANY_RUNNER_PATTERN, count=1000)
        examined += 1000
        for raw in batch:
            try:
                key = text(raw)
            except UnicodeDecodeError:
                continue
            parts = split_runner_key(key)
            if parts is not None:
                candidates.append((key, *parts))
        if int(cursor) == 0:
            break
    candidates = candidates[:PREFIX_SCAN_CANDIDATES]
    if not candidates:
        return {}
    pipe = client.pipeline(transaction=False)
    for key, _, _ in candidates:
        pipe.get(key)
    found: dict[str, int] = {}
    for (_, prefix, runner_id), value in zip(candidates, pipe.execute(raise_on_error=False)):
        try:
            heartbeat = json.loads(text(value))
        except (TypeError, ValueError):  # an error reply, None (expired) or not JSON
            continue
        if isinstance(heartbeat, dict) and str(heartbeat.get("id")) == runner_id:
            found[prefix] = found.get(prefix, 0) + 1
    return dict(sorted(found.items()))


def read_runners(client: Any, prefix: str) -> list[RunnerInfo]:
    """Every runner whose heartbeat is live (found with SCAN), sorted by host and pid."""
    keys = []
    for raw in client.scan_iter(match=f"{prefix}:runner:*", count=500):
        keys.append(text(raw))
        if len(keys) >= SCAN_LIMIT:
            break
    if not keys:
        return []
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
        pipe.pttl(key)
    replies = pipe.execute()
    out = []
    for value, pttl in zip(replies[::2], replies[1::2]):
        if value is None:
            continue
        try:
            d = json.loads(text(value))
            out.append(
                RunnerInfo(
                    id=str(d["id"]),
                    holder=str(d.get("holder", "")),
                    host=str(d.get("host", "")),
                    pid=int(d.get("pid", 0)),
                    version=str(d.get("version", "")),
                    jobs=tuple(d.get("jobs", ())),
                    tasks=tuple(d.get("tasks", ())),
                    started=_ms(d.get("started")),
                    heartbeat=_ms(d.get("heartbeat")),
                    last_tick=_ms(d.get("last_tick")),
                    ttl=pttl / 1000 if isinstance(pttl, int) and pttl >= 0 else None,
                )
            )
        except (ValueError, KeyError, TypeError):
            continue  # not a heartbeat we wrote
    return sorted(out, key=lambda r: (r.host, r.pid, r.id))


def write_heartbeat(
    pipe: Any, prefix: str, runner_id: str, value: str, poll_interval: float = 0.0
) -> None:
    """Queue the heartbeat write on a pipeline; it outlives three missed syncs."""
    ttl = max(HEARTBEAT_TTL_S, round(3 * poll_interval))
    pipe.set(runner_key(prefix, runner_id), value, ex=ttl)
