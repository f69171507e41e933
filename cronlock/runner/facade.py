"""``CronRunner``: every replica registers the same jobs; the store decides who runs each slot.

The facade over the runner's parts, each with one narrow seam:
`Scheduler` (the heap of next slots, the claims,
the decisions), `Run` (one claimed slot: handler, renewal,
finish), `Operations` (events, periodic sync,
heartbeat) and `JobTable` (the job handles). They share
a `RunnerHost`: the store, the clock, who this runner
is, its counters and error reports.

Example:
    ```python
    runner = CronRunner(client, prefix="myapp", default_ttl=60)

    @runner.cron("*/5 * * * *", key="sync-users", ttl=120, timezone="Europe/Athens")
    def sync_users(ctx):
        ...

    runner.start()
    ```
"""

from __future__ import annotations

import encodings.idna  # noqa: F401 - import now: a lazy codec import in a forked child's thread can fail
import logging
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Callable, Optional

from cronlock._stats import RunnerStatistics
from cronlock._validate import seconds_to_ms
from cronlock.clock import ClockLike, as_clock
from cronlock.errors import ConfigurationError
from cronlock.job import Job
from cronlock.ops.admin import Admin
from cronlock.ops.health import Health, Vitals, check_health
from cronlock.options import RUNNER_DEFAULTS, parse_options
from cronlock.registrar import JobSpec, Registrar
from cronlock.runner import forks
from cronlock.runner.dynamic import TaskRegistry
from cronlock.runner.host import ErrorHandler, RunnerHost
from cronlock.runner.jobs import JobTable
from cronlock.runner.operations import Operations
from cronlock.runner.scheduler import Scheduler
from cronlock.stores import Store, as_store
from cronlock.stores.types import Replication, Retention

logger = logging.getLogger("cronlock")

AFTER_FORK = ("restart", "stop")


class CronRunner(Registrar[Job]):
    """Runs registered jobs so that each scheduled slot runs on exactly one replica.

    Jobs are registered with the calls of [`Registrar`][cronlock.registrar.Registrar]:
    `@runner.cron`, `@runner.interval`, `@runner.at`, `runner.every(...)`,
    `runner.add_job`, `@runner.task`.

    Args:
        store: where shared state lives: a [`Store`][cronlock.stores.Store], or a redis-py
            client (``redis.Redis``, a Sentinel master, or ``RedisCluster``), which becomes
            a [`RedisStore`][cronlock.stores.RedisStore]. Give a client a
            ``socket_timeout``: a Redis that stops answering otherwise blocks the scheduler
            until it answers again.
        prefix: namespace of every key; replicas of one app must share it (default: the
            store's, else ``"cronlock"``).
        default_ttl: lease length (seconds) for jobs that do not set ``ttl``.
        clock: where wall time comes from (see [`cronlock.clock`][cronlock.clock]).
        max_workers: handlers that may run at once in this process; also how many due
            slots it claims at once: a slot waits to be claimed until a worker is free,
            so replicas with idle workers take the rest (one that finds no free worker
            within the slot's catch-up leaves it to them).
        max_attempts: default bound on takeovers of one slot.
        overlap: default overlap policy, ``"skip"``, ``"allow"`` or ``"replace"``.
        on_error: ``on_error(error, context)``; by default errors are logged.
        after_fork: ``"restart"`` (a started runner restarts its threads in a forked
            child) or ``"stop"`` (the child's copy stays stopped).
        observers: objects told of claims and runs (history sinks, metrics); see
            [`cronlock.observers`][cronlock.observers].
        history_max: run history entries kept per job in Redis (``P:history:{KEY}``,
            written by the claim and finish scripts); 0 keeps none.
        history_max_age: history entries older than this (seconds or timedelta) are
            dropped; 0 or None: no age limit.
        poll_interval: seconds between the runner's checks for triggers and dynamic
            schedule changes missed on pub/sub, and between heartbeats (default: the
            store's ``default_poll_interval``: 10 s on Redis and PostgreSQL, whose
            notifications bring changes at once, 1 s on SQLite, which has none; see
            [`cronlock.admin`][cronlock.admin]).
        wait_replicas: after each claim, wait (Redis ``WAIT``, in the claim's own round
            trip) until this many replicas have it; a won claim that fewer replicas
            acknowledge within ``wait_timeout`` is not run but handed back
            ([`NotReplicated`][cronlock.errors.NotReplicated] to ``on_error``, phase "acquire").
            Each done or failed finish waits the same way (its ``WAIT`` in the finish's
            round trip; a handover does not wait); one that fewer replicas acknowledge
            is recorded all the same, logged (WARNING) and counted
            (``finishes_unreplicated``).
            Closes the window where a failover loses a claim or a finish and a second
            replica runs the slot (see docs/guarantees.md). 0 (the default) waits for
            none. Not available with ``RedisCluster``.
        wait_timeout: the longest a claim or a finish waits for its replicas (seconds or
            timedelta).
    """

    def __init__(
        self,
        store: Any,
        *,
        prefix: Optional[str] = None,
        default_ttl: Any = RUNNER_DEFAULTS["ttl"],
        clock: ClockLike = None,
        max_workers: int = 8,
        max_attempts: int = RUNNER_DEFAULTS["max_attempts"],
        overlap: str = RUNNER_DEFAULTS["overlap"],
        on_error: Optional[ErrorHandler] = None,
        after_fork: str = "restart",
        observers: Sequence[object] = (),
        history_max: int = 1000,
        history_max_age: Any = timedelta(days=7),
        poll_interval: Optional[float] = None,
        wait_replicas: int = 0,
        wait_timeout: Any = 1.0,
    ) -> None:
        self.store: Store = as_store(store, prefix)
        self.prefix = self.store.prefix
        #: The redis-py client behind a RedisStore (None for another store).
        self.client: Any = getattr(self.store, "client", None)
        seconds_to_ms(default_ttl, "default_ttl")
        self.clock = as_clock(clock)
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigurationError(f"max_workers must be an int >= 1; got {max_workers!r}")
        if after_fork not in AFTER_FORK:
            raise ConfigurationError(f"after_fork must be one of {AFTER_FORK}; got {after_fork!r}")
        if on_error is not None and not callable(on_error):
            raise ConfigurationError(f"on_error must be callable; got {on_error!r}")
        if isinstance(history_max, bool) or not isinstance(history_max, int) or history_max < 0:
            raise ConfigurationError(f"history_max must be an int >= 0; got {history_max!r}")
        self.history_max = history_max
        self.history_max_age_ms = (
            0
            if history_max_age is None
            else seconds_to_ms(history_max_age, "history_max_age", allow_zero=True)
        )
        if poll_interval is None:
            poll_interval = getattr(self.store, "default_poll_interval", 10.0)
        self.poll_interval = seconds_to_ms(poll_interval, "poll_interval") / 1000
        self.replication = _replication(self.store, wait_replicas, wait_timeout)
        self.tasks = TaskRegistry()
        self.max_workers = max_workers
        self.on_error = on_error
        self.after_fork = after_fork
        self._defaults: dict[str, Any] = {
            "ttl": default_ttl,
            "max_attempts": max_attempts,
            "overlap": overlap,
        }
        retention = Retention(history_max, self.history_max_age_ms if history_max else 0)
        self._host = RunnerHost(
            self.store,
            self.clock,
            retention=retention,
            observers=observers,
            on_error=on_error,
            replication=self.replication,
        )
        self.tasks.attach(self.add_job, self._host)
        self._cond = threading.Condition(threading.RLock())
        self._jobs = JobTable(self._cond, self._job_enabled)
        self._parts()
        forks.track(self)

    def _parts(self) -> None:
        """The scheduler and the operations thread (again in a forked child)."""
        self._scheduler = Scheduler(
            self._host,
            self._jobs.by_key,
            self._cond,
            max_workers=self.max_workers,
            replication=self.replication,
        )
        self._ops = Operations(
            self._host, self._scheduler, self._jobs, self.tasks, self.poll_interval
        )

    def _job_enabled(self, job: Job) -> None:
        self._scheduler.job_added(job)

    # -- who this runner is -------------------------------------------------------------

    @property
    def runner_id(self) -> str:
        """This runner's id (a new one in a forked child)."""
        return self._host.runner_id

    @property
    def holder(self) -> str:
        """``"host:pid:runner_id"``, as job state and history name this runner."""
        return self._host.holder

    @property
    def observers(self) -> tuple[object, ...]:
        return self._host.observers

    @property
    def jobs_version(self) -> int:
        """Bumped when a job is added or removed."""
        return self._jobs.version

    @property
    def _stopping(self) -> bool:
        return self._host.stopping

    # -- registration ----------------------------------------------------------------

    def add_spec(self, spec: JobSpec) -> Job:
        """Register the job `spec` describes (every registration call ends here).

        The options it does not set come from this runner's `default_ttl`,
        `max_attempts` and `overlap`. Raises ConfigurationError (naming the value) for
        a bad option or a key already registered, before any Redis work.
        """
        job_options = parse_options(spec.key, spec.schedule, spec.options, self._defaults)
        job = Job(
            self._jobs,
            spec.key,
            fn=spec.fn,
            call=spec.call,
            schedule=spec.schedule,
            options=job_options,
        )
        job.tags = spec.tags
        self._jobs.add(job)  # refuses a key already registered
        return job

    def _accept_task(self, name: str, fn: Callable[..., Any]) -> None:
        self.tasks.add(name, fn)

    def _registration_time(self) -> Callable[[], float]:
        return self.clock.time

    def job(self, key: str) -> Job:
        """The handle of a registered job; KeyError if there is none."""
        job = self._jobs.get(key)
        if job is None:
            raise KeyError(f"no job with key {key!r} in this runner")
        return job

    @property
    def jobs(self) -> list[Job]:
        return self._jobs.all()

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> CronRunner:
        """Start the scheduler and worker threads; returns at once. Idempotent."""
        with self._cond:
            if self._scheduler.alive:
                return self
            self._host.stopping = False
            self._scheduler.start()
            self._ops.start()
        return self

    def stop(self, timeout: float = 30) -> None:
        """Stop gracefully: no new claims; running handlers are cancelled and awaited.

        Handlers still running after ``timeout`` seconds have their lease ended at once
        (handover), so another replica can take their slot over without waiting for
        the lease to lapse; their threads are left to finish on their own.
        """
        scheduler = self._scheduler
        with self._cond:
            self._host.stopping = True
            self._cond.notify_all()
            thread, pool = scheduler.thread, scheduler.pool
            running = list(scheduler.running)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        for run in running:
            run.ctx.cancelled.set()
        deadline = self.clock.monotonic() + timeout
        for run in running:
            run.finished.wait(max(0.0, deadline - self.clock.monotonic()))
        for run in running:
            if not run.finished.is_set():
                run.handover()
        self._ops.stop()  # after the handovers: it may take up to a second to notice
        if pool is not None:
            pool.shutdown(wait=False)
        with self._cond:
            scheduler.thread = None
            scheduler.pool = None
            scheduler.slots.clear()

    @property
    def running(self) -> bool:
        """True while the scheduler thread is alive."""
        return self._scheduler.alive

    def statistics(self) -> RunnerStatistics:
        """A frozen snapshot of this runner's counters."""
        return self._host.stats.snapshot()

    def health(self) -> Health:
        """Store reachable (PING) and the scheduler thread alive and waking; never raises.

        See [`check_health`][cronlock.health.check_health].
        """
        return check_health(self)

    def vitals(self) -> Vitals:
        """What this runner's threads last recorded, for `check_health`."""
        scheduler, ops = self._scheduler, self._ops
        return Vitals(
            scheduler_alive=scheduler.alive,
            last_wake=scheduler.last_wake,
            operations_alive=ops.alive,
            listening=ops.listening,
            unhandled=dict(self.tasks.unhandled),
            last_tick=self.statistics().last_tick,
        )

    @property
    def admin(self) -> Admin:
        """An [`Admin`][cronlock.admin.Admin] on this runner's store."""
        return Admin(self.store)

    def pause(self, key: str) -> None:
        """Pause job ``key`` on every replica (``Admin.pause``)."""
        self.admin.pause(key)

    def resume(self, key: str) -> None:
        """Resume job ``key`` on every replica (``Admin.resume``)."""
        self.admin.resume(key)

    def trigger(self, key: str, *, force: bool = False) -> str:
        """Run job ``key`` once now on one replica (``Admin.trigger``); the request id."""
        return self.admin.trigger(key, force=force)

    def sync(self) -> None:
        """Do in this thread what the runner's operations thread does every ``poll_interval``.

        Starts pending manual runs (triggers) of this runner's jobs, reconciles dynamic
        schedules, and refreshes the registry and heartbeat. For tests and scripts that
        drive the runner with [`run_pending`][cronlock.runner.CronRunner.run_pending]; a
        started runner does it on its own.
        """
        self._ops.sync(inline=True)

    def run_pending(self, now: Optional[float] = None) -> int:
        """Claim and run, in this thread, every slot due at ``now`` (default: the clock).

        One step of the scheduler without any thread: for tests and for scripts that
        drive the loop themselves. Returns how many handlers ran.
        """
        now_ms = round((self.clock.time() if now is None else now) * 1000)
        return self._scheduler.run_pending(now_ms)

    # -- fork ---------------------------------------------------------------------------

    def after_fork_in_child(self) -> None:
        """In a forked child (called by `cronlock.runner.forks`):
        a runner of its own, restarted if it was running and ``after_fork="restart"``."""
        was_running = self._scheduler.thread is not None and not self._host.stopping
        self._host.new_identity()
        self._host.stats.after_fork()
        self._host.stopping = False
        self._cond = threading.Condition(threading.RLock())
        self._jobs.cond = self._cond
        self._jobs.after_fork()
        self._parts()
        if was_running and self.after_fork == "restart":
            self.start()

    def __repr__(self) -> str:
        return f"CronRunner(prefix={self.prefix!r}, jobs={len(self._jobs)}, running={self.running})"


def _replication(store: Store, replicas: Any, timeout: Any) -> Optional[Replication]:
    """What claims wait for (``wait_replicas``, ``wait_timeout``); None: no WAIT."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ConfigurationError(f"wait_replicas must be an int >= 0; got {replicas!r}")
    timeout_ms = seconds_to_ms(timeout, "wait_timeout")
    return store.check_replication(replicas, timeout_ms)
