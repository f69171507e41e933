"""The Flask extension: ``CronLock(app)`` or ``CronLock()`` + ``init_app(app)``.

Jobs are registered on the extension with the runner's decorators; each app the
extension is initialised on gets its own [`CronRunner`][cronlock.runner.CronRunner] (kept in
``app.extensions["cronlock"]``), and every handler runs inside ``app.app_context()``.

Example:
    ```python
    from flask import Flask
    from cronlock.flask import CronLock

    cronlock = CronLock()

    @cronlock.cron("*/5 * * * *", key="sync-users")
    def sync_users(ctx):
        ...                                   # current_app, app.config, db sessions work here

    def create_app():
        app = Flask(__name__)
        app.config["CRONLOCK_STORE_URL"] = "redis://localhost:6379/0"   # or sqlite:///jobs.db
        cronlock.init_app(app)                # registers the jobs; starts nothing by default
        return app
    ```

Threads: ``init_app`` starts none unless ``CRONLOCK_AUTOSTART`` is true, and even then
not in the Werkzeug reloader's watcher process, nor under ``flask`` CLI commands other
than ``flask run`` (``flask shell`` or a migration never runs jobs). Under gunicorn, use
the hooks in [`cronlock.gunicorn`][cronlock.gunicorn] instead of autostart. Under uWSGI,
autostart hands the runner to [`cronlock.uwsgi.manage`][cronlock.uwsgi.manage]: it runs in
each worker, never in the master, and stops when the worker exits. A started runner is
stopped at interpreter exit (``atexit``), handing running slots over.

Limits: ``app.run(debug=True)`` from a script loads the app in the reloader's watcher
before anything says a reloader is coming, so autostart would run jobs there too; use
``flask run --debug``, or ``use_reloader=False``.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from flask import Blueprint, Flask, current_app, has_app_context

from cronlock import gunicorn as _gunicorn
from cronlock import uwsgi as _uwsgi
from cronlock._flask.blueprint import ACTIONS, Authorize, make_blueprint
from cronlock._flask.config import (
    DEFAULTS,
    at_exit,
    should_autostart,
    stop_at_exit,
    store_from_config,
)
from cronlock.context import JobContext
from cronlock.errors import ConfigurationError
from cronlock.job import Job
from cronlock.registrar import (
    JobSpec,
    Registrar,
    add_task_handler,
    duplicate_key_error,
    make_caller,
)
from cronlock.runner import CronRunner

logger = logging.getLogger(__name__)

__all__ = [
    "ACTIONS",
    "DEFAULTS",
    "CronLock",
    "CronLockState",
    "management_blueprint",
    "should_autostart",
]

EXTENSION_KEY = "cronlock"


@dataclass
class CronLockState:
    """What ``app.extensions["cronlock"]`` holds for one app."""

    extension: CronLock
    runner: CronRunner  # ``runner.store`` is the store the extension made from its config
    stop_timeout: float
    app_ref: weakref.ref[Flask]
    jobs: dict[str, Job] = field(default_factory=dict)
    exit_hook: bool = False

    @property
    def app(self) -> Optional[Flask]:
        """The app this state belongs to (None once it is garbage-collected)."""
        return self.app_ref()


class CronLock(Registrar[Optional[Job]]):
    """Flask extension: one runner per app, jobs registered once on the extension.

    Args:
        app: initialise on this app at once (else call
            [`init_app`][cronlock.flask.CronLock.init_app]).
        client: a redis-py client or a [`Store`][cronlock.stores.Store] to use instead
            of ``CRONLOCK_STORE_URL``.
        observers: passed to every runner (history sinks, metrics).
        on_error: ``on_error(error, context)`` for every runner; default: log.

    The registration calls are the runner's (both are a `Registrar`): `@cron`,
    `@interval`, `@at`, `every(...)`, `add_job`, `@task`, with the same arguments and
    checks. Jobs registered before ``init_app`` are kept and attached to every app
    initialised later; jobs registered after are attached to the apps already
    initialised too. In each app a handler runs inside the app context, and a cron
    without ``timezone=`` is in the app's ``CRONLOCK_TIMEZONE``. A registration returns
    the job handle when the extension is initialised on exactly one app, else None.
    The extension keeps no reference to an app (state lives in ``app.extensions``).

    Example:
        ```python
        cronlock = CronLock()

        @cronlock.interval(seconds=30, key="heartbeat")
        def heartbeat():
            current_app.logger.info("alive")

        cronlock.init_app(app)
        cronlock.start(app)            # or CRONLOCK_AUTOSTART=True, or the gunicorn hooks
        ```
    """

    def __init__(
        self,
        app: Optional[Flask] = None,
        *,
        client: Any = None,
        observers: Sequence[object] = (),
        on_error: Optional[Callable[[BaseException, Any], Any]] = None,
    ) -> None:
        self._client = client
        self._observers = tuple(observers)
        self._on_error = on_error
        self._specs: dict[str, JobSpec] = {}  # registered jobs, in order
        self._tasks: dict[str, Callable[..., Any]] = {}  # task name -> handler
        self._states: list[weakref.ref[CronLockState]] = []
        if app is not None:
            self.init_app(app)

    # -- app setup --------------------------------------------------------------------

    def init_app(self, app: Flask) -> None:
        """Read the ``CRONLOCK_*`` configuration, create the app's runner, attach the jobs.

        Starts the runner only if [`should_autostart`][cronlock.flask.should_autostart] says so.
        Raises ConfigurationError for bad configuration, before any Redis work.
        """
        if EXTENSION_KEY in app.extensions:
            raise ConfigurationError(f"cronlock is already initialised on app {app.name!r}")
        for name, default in DEFAULTS.items():
            app.config.setdefault(name, default)
        cfg = app.config
        store = self._client if self._client is not None else store_from_config(cfg)
        runner = CronRunner(
            store,
            prefix=cfg["CRONLOCK_PREFIX"],
            default_ttl=cfg["CRONLOCK_DEFAULT_TTL"],
            max_workers=cfg["CRONLOCK_MAX_WORKERS"],
            max_attempts=cfg["CRONLOCK_MAX_ATTEMPTS"],
            overlap=cfg["CRONLOCK_OVERLAP"],
            after_fork=cfg["CRONLOCK_AFTER_FORK"],
            wait_replicas=cfg["CRONLOCK_WAIT_REPLICAS"],
            wait_timeout=cfg["CRONLOCK_WAIT_TIMEOUT"],
            on_error=self._on_error,
            observers=self._observers,
        )
        stop_timeout = float(cfg["CRONLOCK_STOP_TIMEOUT"])
        state = CronLockState(self, runner, stop_timeout, weakref.ref(app))
        for spec in self._specs.values():
            self._attach(app, state, spec)
        for task_name, fn in self._tasks.items():
            self._attach_task(app, state, task_name, fn)
        app.extensions[EXTENSION_KEY] = state
        self._states.append(weakref.ref(state))
        _gunicorn.manage(runner, stop_timeout=stop_timeout)
        start, why = should_autostart(app)
        logger.debug("cronlock: app %r autostart=%s (%s)", app.name, start, why)
        if start and _uwsgi.inside_uwsgi():
            # Started in each worker (never in a uWSGI master, whose fork() would leave
            # the workers a copy without threads), stopped when the worker exits.
            _uwsgi.manage(runner, stop_timeout=stop_timeout)
        elif start:
            self.start(app)

    def state(self, app: Optional[Flask] = None) -> CronLockState:
        """The state of ``app`` (default: ``current_app``, else the only initialised app)."""
        if app is not None:
            try:
                found: CronLockState = app.extensions[EXTENSION_KEY]
            except KeyError:
                raise RuntimeError(
                    f"cronlock is not initialised on app {app.name!r}: call init_app(app)"
                ) from None
            return found
        if has_app_context():
            return self.state(current_app._get_current_object())  # type: ignore[attr-defined]
        states = self._live_states()
        if len(states) == 1:
            return states[0]
        raise RuntimeError(
            "no app given and no app context: pass the app, or work inside app.app_context()"
            if states
            else "cronlock is not initialised on any app: call init_app(app)"
        )

    def runner_for(self, app: Optional[Flask] = None) -> CronRunner:
        """The runner of ``app`` (same default as [`state`][cronlock.flask.CronLock.state])."""
        return self.state(app).runner

    @property
    def runner(self) -> CronRunner:
        """The runner of ``current_app`` (or of the only initialised app)."""
        return self.runner_for()

    def start(self, app: Optional[Flask] = None) -> CronRunner:
        """Start the app's runner (idempotent); it is stopped again at interpreter exit."""
        state = self.state(app)
        runner = state.runner
        if not runner.running:
            runner.start()
        if not state.exit_hook:
            state.exit_hook = True
            at_exit(functools.partial(stop_at_exit, weakref.ref(runner), state.stop_timeout))
        return runner

    def stop(self, app: Optional[Flask] = None, timeout: Optional[float] = None) -> None:
        """Stop the app's runner gracefully (default timeout: ``CRONLOCK_STOP_TIMEOUT``)."""
        state = self.state(app)
        state.runner.stop(timeout=state.stop_timeout if timeout is None else timeout)

    def _live_states(self) -> list[CronLockState]:
        alive = [s for s in (ref() for ref in self._states) if s is not None]
        self._states = [weakref.ref(s) for s in alive]
        return alive

    # -- registration: the calls are Registrar's; the extension keeps each job for every app

    def add_spec(self, spec: JobSpec) -> Optional[Job]:
        """Keep the job `spec` describes for every app, now and later ones.

        Checked now (with the table's defaults), so a mistake fails at import, not at
        `init_app`. Returns the job handle when the extension is initialised on exactly
        one app, else None (the handles live in each app's runner:
        `runner_for(app).job(key)`).
        """
        spec.job_options()
        if spec.key in self._specs:
            raise duplicate_key_error(spec.key, "on this extension")
        self._specs[spec.key] = spec
        jobs = [self._attach(app, state, spec) for app, state in self._live_apps()]
        return jobs[0] if len(jobs) == 1 else None

    def _accept_task(self, name: str, fn: Callable[..., Any]) -> None:
        if add_task_handler(self._tasks, name, fn):
            for app, state in self._live_apps():
                self._attach_task(app, state, name, fn)

    def _live_apps(self) -> list[tuple[Flask, CronLockState]]:
        pairs = [(state.app, state) for state in self._live_states()]
        return [(app, state) for app, state in pairs if app is not None]

    @staticmethod
    def _attach_task(app: Flask, state: CronLockState, name: str, fn: Callable[..., Any]) -> None:
        state.runner.task(name)(_in_app_context(app, make_caller(fn), fn))

    @staticmethod
    def _attach(app: Flask, state: CronLockState, spec: JobSpec) -> Job:
        def in_app(call: Callable[[JobContext], Any]) -> Callable[[JobContext], Any]:
            return _in_app_context(app, call, spec.fn)

        job = state.runner.add_spec(spec.for_host(app.config["CRONLOCK_TIMEZONE"], in_app))
        state.jobs[spec.key] = job
        return job

    # -- management ---------------------------------------------------------------------

    def blueprint(
        self,
        *,
        authorize: Optional[Authorize] = None,
        url_prefix: str = "/cronlock",
        name: str = "cronlock",
        title: str = "cronlock",
    ) -> Blueprint:
        """The management API and dashboard for this extension's runners.

        Same as ``management_blueprint(self, ...)``; see
        [`management_blueprint`][cronlock.flask.management_blueprint].
        """
        return management_blueprint(
            self, authorize=authorize, url_prefix=url_prefix, name=name, title=title
        )


def _in_app_context(
    app: Flask, call: Callable[[JobContext], Any], fn: Callable[..., Any]
) -> Callable[[JobContext], Any]:
    """``call(ctx)`` inside ``app.app_context()``, named like the user's ``fn`` for logs."""

    def run_in_app_context(ctx: JobContext) -> Any:
        with app.app_context():
            return call(ctx)

    # No __wrapped__: the runner inspects this wrapper's one-parameter signature.
    run_in_app_context.__name__ = getattr(fn, "__name__", "handler")
    run_in_app_context.__qualname__ = getattr(fn, "__qualname__", "handler")
    run_in_app_context.__module__ = getattr(fn, "__module__", __name__)
    return run_in_app_context


def management_blueprint(
    source: Any,
    *,
    authorize: Optional[Authorize] = None,
    url_prefix: str = "/cronlock",
    name: str = "cronlock",
    title: str = "cronlock",
) -> Blueprint:
    """The opt-in management blueprint: a JSON API and a dashboard page.

    Args:
        source: the [`CronLock`][cronlock.flask.CronLock] extension (each app's own runner), a
            ``CronRunner``, an [`Admin`][cronlock.admin.Admin], or a callable returning one.
        authorize: ``authorize(action) -> bool``, called in the request for each
            endpoint, ``action`` one of `ACTIONS` (``"read"``, ``"pause"``,
            ``"resume"``, ``"trigger"``, ``"add_schedule"``, ``"remove_schedule"``).
            Without it reads are open and mutations need ``Authorization: Bearer
            <CRONLOCK_API_TOKEN>``; with neither, every mutation is refused (403).
        url_prefix: where the routes are mounted.
        name: the blueprint's name (distinct names to mount it twice).
        title: the dashboard's heading.

    Guarantees: no state changes on GET; POST bodies must be JSON (else 415); invalid
    input answers 400 with the message the Python API raises; unknown jobs 404.

    Example:
        ```python
        app.register_blueprint(
            management_blueprint(cronlock, authorize=lambda action: current_user.is_admin)
        )
        ```
    """
    return make_blueprint(
        source, authorize=authorize, url_prefix=url_prefix, name=name, title=title
    )
