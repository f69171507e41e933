"""``CronRunner``: every replica registers the same jobs; Redis decides who runs each slot.

A runner owns one scheduler thread that sleeps on a heap of next slots (it never polls
every job), a bounded pool of worker threads for handlers, and uses the process's shared
renewal thread for the leases of running handlers.

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
import itertools
import logging
import os
import secrets
import socket
import threading
import weakref
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, Callable, Optional

from redis.cluster import RedisCluster

from cronlock import _claims, _forksafe
from cronlock._dynamic import TaskRegistry
from cronlock._events import Operations
from cronlock._keys import history_key
from cronlock._run import Run
from cronlock._scheduler import SchedulerLoop, _Entry
from cronlock._stats import RunnerStatistics, StatsCounter
from cronlock._validate import check_client, check_prefix, seconds_to_ms
from cronlock.admin import Admin
from cronlock.clock import ClockLike, as_clock
from cronlock.context import ErrorContext
from cronlock.errors import ConfigurationError
from cronlock.health import Health, check_health
from cronlock.job import Job
from cronlock.options import RUNNER_DEFAULTS, parse_options
from cronlock.registrar import JobSpec, Registrar, duplicate_key_error

logger = logging.getLogger("cronlock")

ErrorHandler = Callable[[BaseException, ErrorContext], Any]

AFTER_FORK = ("restart", "stop")


_runners: weakref.WeakSet[CronRunner] = weakref.WeakSet()


class CronRunner(Registrar[Job], SchedulerLoop):
    """Runs registered jobs so that each scheduled slot runs on exactly one replica.

    Jobs are registered with the calls of [`Registrar`][cronlock.registrar.Registrar]:
    `@runner.cron`, `@runner.interval`, `@runner.at`, `runner.every(...)`,
    `runner.add_job`, `@runner.task`.

    Args:
        client: a redis-py client (``redis.Redis``, a Sentinel master, or ``RedisCluster``).
            Give it a ``socket_timeout``: a Redis that stops answering otherwise blocks
            the scheduler until it answers again.
        prefix: namespace of every key; replicas of one app must share it.
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
            schedule changes missed on pub/sub, and between heartbeats (default 10 s; see
            [`cronlock.admin`][cronlock.admin]).
        wait_replicas: after each claim, wait (Redis ``WAIT``, in the claim's own round
            trip) until this many replicas have it; a won claim that fewer replicas
            acknowledge within ``wait_timeout`` is not run but handed back
            ([`NotReplicated`][cronlock.errors.NotReplicated] to ``on_error``, phase "acquire").
            Closes the window where a failover loses a claim and a second replica runs
            the slot (see docs/guarantees.md). 0 (the default) waits for none. Not
            available with ``RedisCluster``.
        wait_timeout: the longest a claim waits for its replicas (seconds or timedelta).
    """

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "cronlock",
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
        poll_interval: float = 10.0,
        wait_replicas: int = 0,
        wait_timeout: Any = 1.0,
    ) -> None:
        self.client = check_client(client)
        self.prefix = check_prefix(prefix)
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
        self.poll_interval = seconds_to_ms(poll_interval, "poll_interval") / 1000
        self.replication = _replication(self.client, wait_replicas, wait_timeout)
        self.tasks = TaskRegistry()
        self.max_workers = max_workers
        self.observers = tuple(observers)
        self.on_error = on_error
        self.after_fork = after_fork
        self._defaults: dict[str, Any] = {
            "ttl": default_ttl,
            "max_attempts": max_attempts,
            "overlap": overlap,
        }
        self.runner_id = secrets.token_hex(4)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{self.runner_id}"
        self._jobs: dict[str, Job] = {}
        self.jobs_version = 0  # bumped when a job is added or removed (registry refresh)
        self._stats = StatsCounter()
        self._init_threading_state()
        _runners.add(self)

    def _init_threading_state(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._heap: list[_Entry] = []
        self._backlog: deque[_Entry] = deque()
        self._seq = itertools.count()
        self._seeded = False
        self._stopping = False
        self._thread: Optional[threading.Thread] = None
        self._pool: Optional[ThreadPoolExecutor] = None
        self._running: set[Run] = set()
        self._pid = os.getpid()
        self._last_wake: Optional[float] = None  # time.monotonic() of the scheduler's last wake
        self._ops = Operations(self)

    # -- registration ----------------------------------------------------------------

    def add_spec(self, spec: JobSpec) -> Job:
        """Register the job `spec` describes (every registration call ends here).

        The options it does not set come from this runner's `default_ttl`,
        `max_attempts` and `overlap`. Raises ConfigurationError (naming the value) for
        a bad option or a key already registered, before any Redis work.
        """
        job_options = parse_options(spec.key, spec.schedule, spec.options, self._defaults)
        with self._cond:
            if spec.key in self._jobs:
                raise duplicate_key_error(spec.key, "in this runner")
            job = Job(
                self,
                spec.key,
                fn=spec.fn,
                call=spec.call,
                schedule=spec.schedule,
                options=job_options,
            )
            job.tags = spec.tags
            self._jobs[spec.key] = job
            self.jobs_version += 1
            if self._seeded:
                self._seed(job, self._now_ms())
                self._cond.notify()
        return job

    def _accept_task(self, name: str, fn: Callable[..., Any]) -> None:
        self.tasks.add(name, fn)

    def _registration_time(self) -> Callable[[], float]:
        return self.clock.time

    def job(self, key: str) -> Job:
        """The handle of a registered job; KeyError if there is none."""
        with self._cond:
            try:
                return self._jobs[key]
            except KeyError:
                raise KeyError(f"no job with key {key!r} in this runner") from None

    @property
    def jobs(self) -> list[Job]:
        with self._cond:
            return list(self._jobs.values())

    def _enable(self, job: Job) -> None:
        with self._cond:
            if job.enabled:
                return
            job.enabled = True
            job.generation += 1
            if self._seeded:
                self._seed(job, self._now_ms())
                self._cond.notify()

    def _disable(self, job: Job) -> None:
        with self._cond:
            job.enabled = False
            job.generation += 1
            job.next_slot_ms = None

    def _remove(self, job: Job) -> None:
        with self._cond:
            self._disable(job)
            if self._jobs.get(job.key) is job:
                del self._jobs[job.key]
                self.jobs_version += 1

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> CronRunner:
        """Start the scheduler and worker threads; returns at once. Idempotent."""
        with self._cond:
            if self._thread is not None and self._thread.is_alive():
                return self
            self._stopping = False
            self._seed_all()
            self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="cronlock-worker")
            self._thread = threading.Thread(
                target=self._loop, name="cronlock-scheduler", daemon=True
            )
            self._thread.start()
            self._ops.start()
        return self

    def stop(self, timeout: float = 30) -> None:
        """Stop gracefully: no new claims; running handlers are cancelled and awaited.

        Handlers still running after ``timeout`` seconds have their lease ended at once
        (handover), so another replica can take their slot over without waiting for
        the lease to lapse; their threads are left to finish on their own.
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread, pool = self._thread, self._pool
            running = list(self._running)
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
            self._thread = None
            self._pool = None
            self._seeded = False
            self._heap.clear()
            self._backlog.clear()

    @property
    def running(self) -> bool:
        """True while the scheduler thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def statistics(self) -> RunnerStatistics:
        """A frozen snapshot of this runner's counters."""
        return self._stats.snapshot()

    def health(self) -> Health:
        """Redis reachable (PING) and the scheduler thread alive and waking; never raises.

        See [`cronlock.health.check_health`][cronlock.health.check_health].
        """
        return check_health(self)

    @property
    def admin(self) -> Admin:
        """An [`Admin`][cronlock.admin.Admin] on this runner's client and prefix."""
        return Admin(self.client, prefix=self.prefix)

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
        drive the runner with [`run_pending`][cronlock.runner.CronRunner.run_pending]; a started
        runner does it on its own.
        """
        self._ops.sync(inline=True)

    def _history(self, key: str) -> _claims.HistoryOptions:
        if not self.history_max:
            return _claims.NO_HISTORY
        return _claims.HistoryOptions(
            history_key(self.prefix, key), self.history_max, self.history_max_age_ms
        )

    def run_pending(self, now: Optional[float] = None) -> int:
        """Claim and run, in this thread, every slot due at ``now`` (default: the clock).

        One step of the scheduler without any thread: for tests and for scripts that
        drive the loop themselves. Returns how many handlers ran.
        """
        now_ms = round((self.clock.time() if now is None else now) * 1000)
        with self._cond:
            if not self._seeded:
                self._seed_all(now_ms)
            batch = self._pop_due(now_ms)
        return self._process(batch, now_ms, inline=True)

    # -- errors and statistics ----------------------------------------------------------

    def _count(self, name: str) -> None:
        self._stats.add(name)

    def _report(self, error: BaseException, context: ErrorContext) -> None:
        """Hand an error to ``on_error``, or log it; never raises."""
        if self.on_error is not None:
            try:
                self.on_error(error, context)
                return
            except Exception:
                logger.exception("cronlock: on_error raised while handling %r", error)
        level = logging.ERROR if context.phase == "handler" else logging.WARNING
        logger.log(
            level,
            "cronlock: job %r failed in phase %s (slot %s): %s",
            context.key,
            context.phase,
            context.slot.isoformat() if context.slot else "-",
            error,
            exc_info=error,
        )

    # -- fork ---------------------------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        was_running = self._thread is not None and not self._stopping
        # A runner of its own: without a new id every forked copy (gunicorn --preload)
        # would share the parent's heartbeat key and name the parent's pid as holder.
        self.runner_id = secrets.token_hex(4)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{self.runner_id}"
        self._stats.after_fork()
        self._init_threading_state()
        for job in self._jobs.values():
            job.generation += 1
        if was_running and self.after_fork == "restart":
            self.start()

    def __repr__(self) -> str:
        return f"CronRunner(prefix={self.prefix!r}, jobs={len(self._jobs)}, running={self.running})"


def _replication(client: Any, replicas: Any, timeout: Any) -> Optional[_claims.Replication]:
    """What claims wait for (``wait_replicas``, ``wait_timeout``); None: no WAIT."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ConfigurationError(f"wait_replicas must be an int >= 0; got {replicas!r}")
    timeout_ms = seconds_to_ms(timeout, "wait_timeout")
    if not replicas:
        return None
    if isinstance(client, RedisCluster):
        raise ConfigurationError(
            f"wait_replicas={replicas} is not available with RedisCluster (a claim and its "
            "WAIT must share one connection, which cluster pipelines do not give)"
        )
    pool = getattr(client, "connection_pool", None)
    socket_timeout = getattr(pool, "connection_kwargs", {}).get("socket_timeout")
    if isinstance(socket_timeout, (int, float)) and socket_timeout * 1000 <= timeout_ms:
        raise ConfigurationError(
            f"wait_timeout ({timeout_ms / 1000:g} s) must be shorter than the client's "
            f"socket_timeout ({socket_timeout:g} s): the claim's reply waits for the WAIT"
        )
    return _claims.Replication(replicas, timeout_ms)


def _after_fork_in_child() -> None:
    for runner in list(_runners):
        try:
            runner._after_fork_in_child()
        except Exception:
            logger.exception("cronlock: could not restart %r after fork", runner)


# The pools of every runner's client are held across fork() (see cronlock._forksafe), so
# the child's copy of a runner, and the application, can use the client at once: redis-py
# gives the child new connections on first use. _forksafe registered its hooks first (at
# the import above), so its after_in_child runs before this one.
_forksafe.clients_from(lambda: [runner.client for runner in list(_runners)])

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
