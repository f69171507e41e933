"""``Admin``: see and steer the jobs of a fleet of runners, from any process.

``Admin(store_or_client, prefix)`` needs no runner: it reads and writes the same shared
state the runners use, through their [`Store`][cronlock.stores.Store] (a redis-py client
becomes a [`RedisStore`][cronlock.stores.RedisStore]), so a management script, a web
endpoint or the ``cronlock`` CLI can use it. Every runner honours what it writes:

* ``pause(key)`` / ``resume(key)`` set a flag in the job's state hash, which the claim
  script checks (no extra round trip): every replica skips the job from its next claim,
  and the flag survives runner restarts. ``pause_all()`` pauses every job in the
  registry and sets ``P:pause-all``, so jobs first registered while it is set start
  paused too. (A Cluster cannot have one key that every claim script reads, since a
  script only touches its own job's slot; so pause-all is a flag per job.)
* ``trigger(key)`` queues a manual run: exactly one replica that has the job pops the
  request and runs it once, at once, beside the scheduled slots (see
  ``cronlock/scripts/job_trigger.lua``). Replicas hear of it through pub/sub within
  about a second, else at their next ``poll_interval`` check. A trigger of a paused
  job is refused unless forced, and a request no replica took before it expires
  (`DEFAULT_TRIGGER_EXPIRES_S` by default, on the store's clock) is dropped.
* ``jobs()`` lists what runners registered, less the jobs of dynamic schedules that
  were removed; each job says how many live runners have it and when one last did
  (``runners``, ``last_seen``). ``forget(key)`` drops a job for good.
* ``add_schedule`` / ``remove_schedule`` store dynamic schedules for handlers that
  runners registered with ``@runner.task(name)``; see
  `cronlock.runner.dynamic`.

Example:
    >>> admin = Admin(client, prefix="myapp")  # doctest: +SKIP
    >>> admin.pause("sync-users"); admin.trigger("sync-users", force=True)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from typing import Any, Optional

from cronlock._durations import Seconds, seconds_to_ms
from cronlock._registry import RunnerInfo, parse_heartbeat
from cronlock._validate import check_key
from cronlock.clock import wall_ms
from cronlock.context import ms_to_datetime
from cronlock.errors import ConfigurationError, TriggerRefused
from cronlock.ops.history import HistoryEntry, check_limit
from cronlock.ops.jobs import FleetStatus, JobStatus, Liveness, job_status
from cronlock.ops.schedules import SCHEDULE_OPTIONS, ScheduleSpec
from cronlock.options import check_option_names
from cronlock.stores import Store, as_store

__all__ = [
    "DEFAULT_TRIGGER_EXPIRES_S",
    "Admin",
    "FleetStatus",
    "JobStatus",
    "RunnerInfo",
    "ScheduleSpec",
]

#: Pending trigger requests kept per job (older ones are dropped).
MAX_PENDING_TRIGGERS = 100
#: How long a trigger request waits for a replica to take it, unless told otherwise.
DEFAULT_TRIGGER_EXPIRES_S = 600.0


class Admin:
    """Inspect and steer jobs through their store; usable from any process, no runner needed.

    Args:
        store: a [`Store`][cronlock.stores.Store], or a redis-py client (``redis.Redis``
            or ``RedisCluster``, responses decoded or not), which becomes a
            [`RedisStore`][cronlock.stores.RedisStore].
        prefix: the runners' prefix (default: the store's, else ``"cronlock"``).

    Every method is a few round trips at most; ``jobs()`` pipelines one read per job.
    """

    def __init__(self, store: Any, prefix: Optional[str] = None) -> None:
        self.store: Store = as_store(store, prefix)
        self.prefix = self.store.prefix
        #: The redis-py client behind a RedisStore (None for another store).
        self.client: Any = getattr(self.store, "client", None)

    # -- reading ------------------------------------------------------------------------

    def _registry(self) -> dict[str, dict[str, Any]]:
        raw = self.store.registry()
        out = {}
        for key, value in raw.items():
            try:
                out[key] = json.loads(value)
            except ValueError:
                out[key] = {}
        return out

    def _listed(self) -> dict[str, dict[str, Any]]:
        """The registry less the jobs of dynamic schedules that were removed (a runner
        may have registered one before it heard of the removal)."""
        registry = self._registry()
        if any(entry.get("task") for entry in registry.values()):
            schedules = self.store.schedules()
            registry = {k: e for k, e in registry.items() if not e.get("task") or k in schedules}
        return registry

    def _statuses(self, keys: list[str], registry: dict[str, dict[str, Any]]) -> list[JobStatus]:
        if not keys:
            return []
        states = self.store.job_states(keys)
        live = Liveness.of(self.runners())
        now_ms = wall_ms()
        return [
            job_status(
                key,
                dict(state.fields),
                state.pending_triggers,
                registry.get(key),
                now_ms=now_ms,
                live=live,
            )
            for key, state in zip(keys, states)
        ]

    def jobs(self) -> list[JobStatus]:
        """Every registered job, sorted by key, less those of removed dynamic schedules."""
        registry = self._listed()
        return self._statuses(sorted(registry), registry)

    def job(self, key: str) -> JobStatus:
        """One job's status; KeyError when no runner registered it and it has no state."""
        check_key(key)
        registry = {}
        raw = self.store.registry_entry(key)
        if raw is not None:
            try:
                registry[key] = json.loads(raw)
            except ValueError:
                registry[key] = {}
        status = self._statuses([key], registry)[0]
        if raw is None and status.status is None and not status.paused:
            raise KeyError(f"no job {key!r} under prefix {self.prefix!r}")
        return status

    def history(self, key: str, limit: int = 50) -> list[HistoryEntry]:
        """The latest ``limit`` run history entries of job ``key``, newest first."""
        return self.store.history(check_key(key), check_limit(limit))

    def runners_with(self, key: str) -> Optional[int]:
        """How many live runners have job ``key`` (None: a runner has too many jobs to
        list them in its heartbeat, so it may)."""
        return Liveness.of(self.runners()).runners(check_key(key))

    def runners(self) -> list[RunnerInfo]:
        """Every runner with a live heartbeat."""
        found = (parse_heartbeat(value, ttl) for value, ttl in self.store.heartbeats())
        return sorted((r for r in found if r is not None), key=lambda r: (r.host, r.pid, r.id))

    def status(self) -> FleetStatus:
        """Counts over runners, jobs and schedules (for ``cronlock status``)."""
        jobs = self.jobs()
        return FleetStatus(
            runners=len(self.runners()),
            jobs=len(jobs),
            paused=sum(j.paused for j in jobs),
            running=sum(j.status == "running" and j.lease_until is not None for j in jobs),
            failing=sum(j.consecutive_failures > 0 for j in jobs),
            schedules=self.store.schedule_count(),
            pause_all=self.store.pause_all_active(),
        )

    def forget(self, key: str) -> bool:
        """Drop job ``key`` from the registry, its state and its history; True if it existed.

        For jobs deleted from the code. A runner that still has the job registers it
        again at its next start (or change).
        """
        return self.store.forget(check_key(key))

    # -- steering -----------------------------------------------------------------------

    def pause(self, key: str) -> None:
        """Pause job ``key`` on every replica from their next claim; survives restarts.

        A run in progress is not interrupted. The key need not be registered yet.
        """
        self.store.pause(check_key(key))

    def resume(self, key: str) -> None:
        """Undo `pause` (the next due slot runs; missed ones follow catch-up)."""
        self.store.resume(check_key(key))

    def pause_all(self) -> int:
        """Pause every registered job, and jobs registered from now on; how many were paused."""
        keys = sorted(self._listed())
        self.store.pause_all(keys)
        return len(keys)

    def resume_all(self) -> int:
        """Resume every registered job (also those paused one by one); how many."""
        keys = sorted(self._listed())
        self.store.resume_all(keys)
        return len(keys)

    def trigger(
        self, key: str, *, force: bool = False, expires: Seconds = DEFAULT_TRIGGER_EXPIRES_S
    ) -> str:
        """Ask for one run of job ``key`` now, on exactly one replica; the request id.

        The run is a *manual* slot: its own slot time (when it starts), fencing token
        and history entries (``kind`` ``manual``, ``trigger`` = the id), beside the
        scheduled slots. Unless ``force``, it is refused here when the job is paused,
        and dropped (history: ``skipped``) when the job is paused by the time a replica
        takes it, or a run holds a live lease and the job's overlap is ``skip``. A
        request no replica has taken ``expires`` seconds from now (the store's clock) is
        dropped, forced or not (history: ``skipped``, reason ``expired``): a trigger
        made while no runner is alive does not run days later. A triggered run is not
        taken over if its replica dies.

        Raises:
            KeyError: no runner has registered job ``key`` (nothing would run it).
            TriggerRefused: the job is paused and ``force`` is not set.
            ConfigurationError, TypeError: ``expires`` is not a positive duration.
        """
        check_key(key)
        if not isinstance(force, bool):
            raise TypeError(f"force must be True or False; got {force!r}")
        expires_ms = seconds_to_ms(expires, "expires")
        if self.store.registry_entry(key) is None:
            raise KeyError(f"no runner has registered job {key!r} under prefix {self.prefix!r}")
        if not force and self.store.job_states([key])[0].fields.get("paused") == "1":
            raise TriggerRefused(
                key,
                f"job {key!r} is paused: a trigger would be dropped; resume it first, or "
                "force the run",
            )
        request_id = secrets.token_hex(6)
        deadline_ms = self.store.time_ms() + expires_ms
        request = f"{request_id}|{'1' if force else '0'}|{wall_ms()}|{_me()}|{deadline_ms}"
        self.store.queue_trigger(key, request, MAX_PENDING_TRIGGERS)
        return request_id

    # -- dynamic schedules ----------------------------------------------------------------

    def add_schedule(
        self,
        task: str,
        *,
        cron: Optional[str] = None,
        interval: Optional[float] = None,
        timezone: str = "UTC",
        payload: Any = None,
        schedule_id: Optional[str] = None,
        **options: Any,
    ) -> ScheduleSpec:
        """Store a schedule for task ``task`` (a ``@runner.task`` handler); every runner
        with the task picks it up within a few seconds. Replaces one with the same id.

        Args:
            task: the task name.
            cron: a cron expression (in ``timezone``), or
            interval: seconds between runs on the UTC grid (exactly one of the two).
            payload: any JSON value, passed as ``ctx.payload``.
            schedule_id: the id (also the job key of its runs); default ``TASK-<random>``.
            **options: ``ttl``, ``heartbeat``, ``overlap``, ``max_attempts``, ``catch_up``,
                ``jitter``, ``retries``, ``retry_backoff``, as for code registration.

        Raises:
            ConfigurationError: what registering the same job in code would raise.
        """
        check_key(task, "task name")
        sid = schedule_id if schedule_id is not None else f"{task}-{secrets.token_hex(4)}"
        if isinstance(interval, bool) or (
            interval is not None and not isinstance(interval, (int, float))
        ):
            raise TypeError(f"interval must be seconds as int or float; got {interval!r}")
        spec = ScheduleSpec(
            id=sid,
            task=task,
            cron=cron,
            interval=None if interval is None else float(interval),
            timezone=timezone,
            payload=payload,
            options={k: v for k, v in options.items() if v is not None},
            created=ms_to_datetime(wall_ms()),
            created_by=_me(),
        )
        check_option_names(options, where=f"schedule {sid!r}", known=SCHEDULE_OPTIONS)
        spec.validate()
        self.store.put_schedule(sid, spec.to_json())
        return spec

    def list_schedules(self) -> list[ScheduleSpec]:
        """Every stored dynamic schedule, sorted by id (unparseable entries are skipped)."""
        raw = self.store.schedules()
        out = []
        for value in raw.values():
            try:
                out.append(ScheduleSpec.from_json(value))
            except ConfigurationError:
                continue
        return sorted(out, key=lambda s: s.id)

    def remove_schedule(self, schedule_id: str) -> bool:
        """Delete a dynamic schedule; True if it existed. Runs in progress finish.

        An id that is not stored changes nothing (runners are not told to reconcile).
        """
        if schedule_id not in self.store.schedules():
            return False
        return self.store.remove_schedule(schedule_id)

    def __repr__(self) -> str:
        return f"Admin(prefix={self.prefix!r})"


def _me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
