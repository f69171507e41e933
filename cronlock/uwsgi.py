"""uWSGI hooks: jobs run in the workers, each stopped gracefully when it exits.

Hand a runner to [`manage`][cronlock.uwsgi.manage] (the Flask extension does it for you
under uWSGI when ``CRONLOCK_AUTOSTART`` is on) and do not start it yourself:

```python
import cronlock.uwsgi

runner = cronlock.uwsgi.manage(CronRunner(client, prefix="myapp"))
```

Where jobs run: **in the workers, never in the master**, with or without ``lazy-apps``.

* **with** ``lazy-apps`` each worker imports the app after the fork, and ``manage``
  starts the runner there at once.
* **without** it (uWSGI's default, like gunicorn's ``--preload``) the master imports the
  app and then forks the workers. uWSGI's ``fork()`` does not run Python's
  ``os.register_at_fork`` handlers, so a runner started in the master would keep its
  threads there and leave each worker a copy whose threads do not exist (and a master
  thread holding the GIL at the fork can freeze a worker). So ``manage`` starts
  nothing in the master; a ``uwsgidecorators.postfork`` hook starts the runner in each
  worker, including every worker the master forks later to replace a recycled one.

When a worker exits (``max-requests``, ``reload-on-rss``, a reload, a shutdown) a
``uwsgi.atexit`` hook stops its runners: running handlers see ``ctx.cancelled``, and a
run that gives up (or is still busy when the stop timeout ends) hands its slot over at
once instead of holding it until its lease lapses. The stop timeout is capped at 80% of
``worker-reload-mercy`` when that option is set (uWSGI kills a worker after it).

Threads: some uWSGI builds (Debian's, for one) run no Python threads unless
``enable-threads`` or ``threads`` is set; a runner there would never run a job.
``manage`` raises [`ConfigurationError`][cronlock.errors.ConfigurationError] naming the
option instead. Builds that run threads anyway (the ``pyuwsgi`` wheel) need neither.

Outside uWSGI this module imports fine and [`inside_uwsgi`][cronlock.uwsgi.inside_uwsgi]
is false; ``manage`` then raises RuntimeError.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import weakref
from typing import Any, Callable, Optional

from cronlock import gunicorn as _hooks
from cronlock.errors import ConfigurationError
from cronlock.runner import CronRunner

logger = logging.getLogger(__name__)

__all__ = ["THREADS_OFF", "inside_uwsgi", "manage", "post_fork", "worker_exit"]

#: The start of the error raised where this uWSGI runs no Python threads.
THREADS_OFF = "uWSGI runs no Python threads in this configuration"

# Share of uWSGI's worker-reload-mercy a stop may take before the worker is killed.
_TIMEOUT_SHARE = 0.8

_lock = threading.Lock()
# Runners to run in every worker: started by post_fork (or at once in a worker).
_wanted: weakref.WeakSet[CronRunner] = weakref.WeakSet()
_installed: set[int] = set()  # the pid that installed the hooks
_forked: set[int] = set()  # the worker pids whose fork handlers have run


def _uwsgi() -> Any:
    """The ``uwsgi`` module uWSGI embeds in its processes, or None outside uWSGI."""
    try:
        import uwsgi  # noqa: PLC0415 - embedded by uWSGI in its processes only
    except ImportError:
        return None
    return uwsgi


def inside_uwsgi() -> bool:
    """True in a process of a uWSGI server (master or worker)."""
    return _uwsgi() is not None


def _option(uwsgi: Any, name: str) -> Any:
    """A uWSGI option as set (``True``, ``bytes`` or a list of them), None if unset."""
    opt = getattr(uwsgi, "opt", None) or {}
    return opt.get(name)


def _check_threads(uwsgi: Any) -> None:
    """Raise ConfigurationError where this uWSGI will not run Python threads.

    ``uwsgi.has_threads`` is what uWSGI itself decided (the option, or a build that
    enables threads by default, as pyuwsgi's does). A probe thread would not tell: in
    a build without threads, a thread does run while the worker is in Python code (its
    import, a request) and stops only once uWSGI waits for requests holding the GIL.
    """
    if getattr(uwsgi, "has_threads", 1):
        return
    raise ConfigurationError(
        f"{THREADS_OFF}, so cronlock's scheduler thread would never run a job: "
        "add 'enable-threads = true' (or 'threads = N') to the uWSGI options "
        "(--enable-threads on the command line)"
    )


def _cap(uwsgi: Any) -> Optional[float]:
    """The longest stop uWSGI lets an exiting worker take, from ``worker-reload-mercy``."""
    value = _option(uwsgi, "worker-reload-mercy")
    if isinstance(value, list):
        value = value[-1]
    try:
        seconds = float(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        return None
    return max(0.5, seconds * _TIMEOUT_SHARE) if seconds > 0 else None


def _in_worker(uwsgi: Any) -> bool:
    return int(uwsgi.worker_id()) > 0


def manage(runner: CronRunner, *, stop_timeout: float = _hooks.DEFAULT_STOP_TIMEOUT) -> CronRunner:
    """Run ``runner`` in every uWSGI worker and stop it when the worker exits; returns it.

    In a worker (``lazy-apps``, or after the fork) the runner starts at once. In the
    master (the app imported before the fork) it starts in each worker just after the
    fork, never in the master; a runner already running in the master is stopped
    here, before the fork. The first call installs the hooks (``postfork``, ``atexit``).

    Raises:
        ConfigurationError: this uWSGI runs no Python threads (add ``enable-threads``).
        RuntimeError: not inside uWSGI.

    Example:
        ```python
        runner = cronlock.uwsgi.manage(CronRunner(client, prefix="myapp"), stop_timeout=20)
        ```
    """
    uwsgi = _uwsgi()
    if uwsgi is None:
        raise RuntimeError("cronlock.uwsgi.manage() works only inside a uWSGI process")
    _check_threads(uwsgi)
    _hooks.manage(runner, stop_timeout=stop_timeout)
    with _lock:
        _wanted.add(runner)
    _install(uwsgi)
    if _in_worker(uwsgi):
        if not runner.running:
            runner.start()
    elif runner.running:
        logger.info("cronlock: stopping %r in the uWSGI master; it runs in the workers", runner)
        runner.stop(timeout=_cap(uwsgi) or stop_timeout)
    return runner


def _install(uwsgi: Any) -> None:
    """Register the post-fork and worker-exit hooks once per process."""
    with _lock:
        if _installed:
            return
        _installed.add(os.getpid())
    from uwsgidecorators import postfork  # noqa: PLC0415 - importable only inside uWSGI

    postfork(post_fork)
    previous: Optional[Callable[[], Any]] = getattr(uwsgi, "atexit", None)

    def at_worker_exit() -> None:
        try:
            worker_exit()
        finally:
            if previous is not None:
                previous()

    uwsgi.atexit = at_worker_exit


def _after_fork_in_child(uwsgi: Any) -> None:
    """Do in this worker what Python does after its own ``os.fork()``, unless uWSGI did.

    uWSGI forks its workers in C and, unless ``py-call-osafterfork`` or
    ``py-call-uwsgi-fork-hooks`` is set, skips ``PyOS_AfterFork_Child()``, the C-API call
    Python documents as required in a forked child that goes on running Python. Without
    it no ``os.register_at_fork`` handler runs: every worker keeps the master's runner
    identity (its id, and a lease owner naming the master's pid, the same in every
    worker) and ``threading`` still lists the master's threads. So call it here, once
    per worker, in the worker's main thread before it starts any thread (what
    ``py-call-osafterfork`` does in the same place). It runs cronlock's handlers (a new
    runner id and holder, fresh locks; ``after_fork="restart"`` restarts a runner that
    was running in the master) and the standard library's (threading, logging, random).
    """
    opt = getattr(uwsgi, "opt", None) or {}
    if opt.get("py-call-osafterfork") or opt.get("py-call-uwsgi-fork-hooks"):
        return  # uWSGI ran the handlers already
    with _lock:
        if os.getpid() in _forked:
            return
        _forked.add(os.getpid())
    after_fork = getattr(ctypes.pythonapi, "PyOS_AfterFork_Child", None)
    if after_fork is None:  # not CPython: nothing to call
        return
    after_fork.restype = None
    after_fork.argtypes = []
    after_fork()


def post_fork() -> None:
    """Worker, just forked from the master: start the runners handed to ``manage``.

    Installed by ``manage``; call it yourself only from a ``post_fork_hook`` of your own
    that replaces ``uwsgidecorators``'.
    """
    uwsgi = _uwsgi()
    if uwsgi is None or not _in_worker(uwsgi):  # a mule or the spooler: no jobs there
        return
    _after_fork_in_child(uwsgi)
    with _lock:
        runners = list(_wanted)
    for runner in runners:
        if not runner.running:
            runner.start()


def worker_exit() -> None:
    """Worker, exiting: stop its runners; running slots are handed over at once.

    Installed as ``uwsgi.atexit`` by ``manage`` (an ``atexit`` set before is still called
    after it).
    """
    uwsgi = _uwsgi()
    _hooks.stop_all(timeout=_cap(uwsgi) if uwsgi is not None else None)
