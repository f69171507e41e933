"""The project's runner before and after Django is ready: `ProjectRunner`.

``from cronlock.django import runner`` has to work at import time, in a ``jobs.py``
module, before settings are read. `ProjectRunner` takes the registrations
(``@runner.cron``, ``@runner.interval``, ``@runner.at``, ``runner.every(...)``,
``runner.add_job``, ``@runner.task``) and hands each one to the real
[`CronRunner`][cronlock.runner.CronRunner] once the app is ready
(``CronlockConfig.ready()`` calls `ProjectRunner.bind`). A registration made after
that goes to the real runner at once, so its mistakes raise on the decorator's line;
one made earlier is replayed by ``bind`` and its mistakes raise from ``django.setup()``.

Every handler is wrapped so that Django's database connections of the thread that runs
it are checked before and after each run (``django.db.close_old_connections``, what
Django does around each request): a long-lived worker thread never keeps a broken
connection, nor one older than ``CONN_MAX_AGE`` (with the default ``CONN_MAX_AGE = 0``,
the connection a run opened is closed when the run ends).
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Optional, TypeVar

from django.db import close_old_connections

from cronlock.admin import Admin
from cronlock.health import Health
from cronlock.job import Job
from cronlock.runner import CronRunner
from cronlock.schedules import Schedule

__all__ = ["ProjectRunner", "with_fresh_connections"]

F = TypeVar("F", bound=Callable[..., Any])
_Apply = Callable[[CronRunner], Any]


def with_fresh_connections(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, with ``close_old_connections()`` before and after each call.

    The wrapper keeps ``fn``'s name, module and signature (``functools.wraps``), so the
    runner derives the same default key and passes the ``JobContext`` exactly when it
    would to ``fn``.
    """

    @functools.wraps(fn)
    def run_with_fresh_connections(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return run_with_fresh_connections


class ProjectRunner:
    """The Django project's runner: takes registrations at import, runs once Django is ready.

    The registration methods are [`CronRunner`][cronlock.runner.CronRunner]'s, with one
    difference: ``@runner.cron`` without ``timezone=`` uses ``settings.CRONLOCK["TIMEZONE"]``.

    Example:
        ```python
        # myapp/jobs.py
        from cronlock.django import runner

        @runner.cron("*/5 * * * *", key="sync-users")
        def sync_users(ctx):
            User.objects.filter(...)          # the ORM works; connections are tidied per run

        runner.every(10).minutes.do(send_digest)
        ```
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._pending: list[_Apply] = []
        self._runner: Optional[CronRunner] = None
        self._timezone = "UTC"
        self._stop_timeout = 30.0
        #: ``(started, why)``: what the autostart decision was in this process (None
        #: before Django is ready).
        self.autostart: Optional[tuple[bool, str]] = None

    # -- binding ------------------------------------------------------------------------

    def bind(self, runner: CronRunner, *, timezone: str, stop_timeout: float) -> None:
        """Attach the real runner and replay the registrations made so far (once)."""
        with self._lock:
            if self._runner is not None:
                raise RuntimeError("cronlock.django: the project runner is already bound")
            self._runner = runner
            self._timezone = timezone
            self._stop_timeout = stop_timeout
            pending, self._pending = self._pending, []
            for apply in pending:
                apply(runner)

    @property
    def bound(self) -> bool:
        """True once Django is ready and the real runner exists."""
        return self._runner is not None

    @property
    def runner(self) -> CronRunner:
        """The real runner; RuntimeError before Django is ready."""
        runner = self._runner
        if runner is None:
            raise RuntimeError(
                "cronlock.django is not ready: add 'cronlock.django' to INSTALLED_APPS "
                "and use the runner after django.setup()"
            )
        return runner

    def _register(self, apply: _Apply) -> Any:
        with self._lock:
            if self._runner is None:
                self._pending.append(apply)
                return None
        return apply(self._runner)

    # -- registration -------------------------------------------------------------------

    def add_job(
        self,
        fn: Callable[..., Any],
        schedule: Schedule,
        *,
        args: tuple[Any, ...] = (),
        kwargs: Optional[dict[str, Any]] = None,
        tags: Any = (),
        **options: Any,
    ) -> Optional[Job]:
        """Register ``fn`` on ``schedule``; the job handle, or None before Django is ready.

        See [`Registrar.add_job`][cronlock.registrar.Registrar.add_job].
        """
        wrapped = with_fresh_connections(fn)
        return self._register(  # type: ignore[no-any-return]
            lambda r: r.add_job(wrapped, schedule, args=args, kwargs=kwargs, tags=tags, **options)
        )

    def cron(
        self,
        expression: str,
        *,
        timezone: Optional[str] = None,
        dst_fold: str = "once",
        **options: Any,
    ) -> Callable[[F], F]:
        """Decorator: run at each time ``expression`` matches (``timezone``: the setting's).

        See [`Registrar.cron`][cronlock.registrar.Registrar.cron]; returns the function unchanged.
        """

        def decorate(fn: F) -> F:
            wrapped = with_fresh_connections(fn)
            self._register(
                lambda r: r.cron(
                    expression, timezone=timezone or self._timezone, dst_fold=dst_fold, **options
                )(wrapped)
            )
            return fn

        return decorate

    def interval(
        self,
        seconds: Any = 0,
        *,
        minutes: float = 0,
        hours: float = 0,
        offset: Any = 0,
        **options: Any,
    ) -> Callable[[F], F]:
        """Decorator: run every ``seconds + minutes + hours`` on the UTC epoch grid."""

        def decorate(fn: F) -> F:
            wrapped = with_fresh_connections(fn)
            self._register(
                lambda r: r.interval(
                    seconds, minutes=minutes, hours=hours, offset=offset, **options
                )(wrapped)
            )
            return fn

        return decorate

    def at(self, when: Any, **options: Any) -> Callable[[F], F]:
        """Decorator: run once, cluster-wide, at ``when`` (aware datetime or ISO-8601)."""

        def decorate(fn: F) -> F:
            wrapped = with_fresh_connections(fn)
            self._register(lambda r: r.at(when, **options)(wrapped))
            return fn

        return decorate

    def every(self, interval: int = 1) -> Any:
        """The ``schedule`` library's DSL: ``runner.every(10).minutes.do(fn)``.

        Once Django is ready this is the runner's own chain (``.do()`` returns the job
        handle); before, a recording of the chain that ``bind`` replays (``.do()``
        returns None).
        """
        with self._lock:
            runner = self._runner
        if runner is not None:
            return _FreshEvery(runner.every(interval))
        return _Recorded(self, interval, ())

    def task(self, name: str) -> Callable[[F], F]:
        """Decorator: a handler for dynamic schedules named ``name`` (``CronRunner.task``)."""

        def decorate(fn: F) -> F:
            wrapped = with_fresh_connections(fn)
            self._register(lambda r: r.task(name)(wrapped))
            return fn

        return decorate

    # -- the real runner's state and controls -------------------------------------------

    def start(self) -> CronRunner:
        """Start the runner (idempotent); it is stopped at interpreter exit."""
        runner = self.runner
        if not runner.running:
            runner.start()
        return runner

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stop gracefully (default timeout: ``settings.CRONLOCK["STOP_TIMEOUT"]``)."""
        self.runner.stop(timeout=self._stop_timeout if timeout is None else timeout)

    @property
    def running(self) -> bool:
        """True while the real runner's scheduler thread is alive (False before ready)."""
        return self._runner is not None and self._runner.running

    @property
    def jobs(self) -> list[Job]:
        """The registered jobs' handles."""
        return self.runner.jobs

    def job(self, key: str) -> Job:
        """The handle of job ``key``; KeyError if there is none."""
        return self.runner.job(key)

    @property
    def admin(self) -> Admin:
        """An [`Admin`][cronlock.admin.Admin] on the project's Redis and prefix."""
        return self.runner.admin

    def health(self) -> Health:
        """The real runner's [`health`][cronlock.runner.CronRunner.health]."""
        return self.runner.health()

    def __repr__(self) -> str:
        state = repr(self._runner) if self._runner is not None else "not ready"
        return f"<cronlock.django runner: {state}>"


class _FreshEvery:
    """The runner's ``every(...)`` chain whose ``do(fn)`` wraps ``fn`` for Django."""

    def __init__(self, chain: Any) -> None:
        self._chain = chain

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._chain, name)
        if callable(value):

            def step(*args: Any, **kwargs: Any) -> Any:
                result = value(*args, **kwargs)
                return _FreshEvery(result) if result is self._chain else result

            return step
        return _FreshEvery(value) if value is self._chain else value

    def do(self, job_func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Register ``job_func`` (wrapped for Django's connections); the job handle."""
        if not callable(job_func):
            raise TypeError(f"do() needs a callable; got {job_func!r}")
        return self._chain.do(with_fresh_connections(job_func), *args, **kwargs)

    def __repr__(self) -> str:
        return repr(self._chain)


_Step = tuple[str, Optional[tuple[tuple[Any, ...], dict[str, Any]]]]


class _Recorded:
    """An ``every(...)`` chain before Django is ready: each step is kept, ``do`` replays it."""

    def __init__(self, owner: ProjectRunner, interval: int, steps: tuple[_Step, ...]) -> None:
        self._owner = owner
        self._interval = interval
        self._steps = steps

    def __getattr__(self, name: str) -> _Recorded:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Recorded(self._owner, self._interval, (*self._steps, (name, None)))

    def __call__(self, *args: Any, **kwargs: Any) -> _Recorded:
        if not self._steps or self._steps[-1][1] is not None:
            raise TypeError(f"{self!r} is not callable")
        name = self._steps[-1][0]
        steps = (*self._steps[:-1], (name, (args, dict(kwargs))))
        return _Recorded(self._owner, self._interval, steps)

    def do(self, job_func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Keep the chain and ``job_func``; registered when Django is ready."""
        if not callable(job_func):
            raise TypeError(f"do() needs a callable; got {job_func!r}")
        wrapped = with_fresh_connections(job_func)
        steps, interval = self._steps, self._interval

        def apply(runner: CronRunner) -> Any:
            chain: Any = runner.every(interval)
            for name, call in steps:
                chain = getattr(chain, name)
                if call is not None:
                    chain = chain(*call[0], **call[1])
            return chain.do(wrapped, *args, **kwargs)

        self._owner._register(apply)

    def __repr__(self) -> str:
        chain = "".join(f".{n}" if c is None else f".{n}(...)" for n, c in self._steps)
        return f"<every({self._interval}){chain}, registered when Django is ready>"
