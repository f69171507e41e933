"""gunicorn server hooks: jobs run in the workers, each stopped gracefully when it exits.

Import the hooks into your ``gunicorn.conf.py``; gunicorn finds them by name:

```python
# gunicorn.conf.py
from cronlock.gunicorn import on_exit, post_fork, post_worker_init, when_ready, worker_exit
```

The hooks act on the runners they *manage*: every runner of the Flask extension
([`cronlock.flask.CronLock`][cronlock.flask.CronLock]) and any runner given to
[`manage`][cronlock.gunicorn.manage].

Where jobs run:

* **without** ``--preload`` each worker imports the app; ``post_worker_init`` starts its
  runner once the app is loaded. The master never imports the app, so never runs jobs.
* **with** ``--preload`` the master imports the app before forking. ``when_ready`` stops
  a runner the master may have started (``CRONLOCK_AUTOSTART``) *before* the first
  fork, so no runner thread is ever inside a Redis call at a fork, and ``post_fork``
  starts the copy each worker inherited. Jobs run in the workers only, in both modes.

Every worker competes for each slot and exactly one wins; more workers mean more
candidates, not more runs. When a worker exits (``--max-requests`` recycling, a HUP
reload, a graceful shutdown) ``worker_exit`` stops its runners: running handlers see
``ctx.cancelled``, and a run that gives up (or is still busy when the stop timeout ends)
hands its slot over at once instead of holding it until its lease lapses.

Keep the stop timeout below gunicorn's ``graceful_timeout`` and ``timeout`` (it is
capped at 80% of the smaller one), or gunicorn kills the worker before the handover.

These functions never import gunicorn itself: ``server`` and ``worker`` are only read.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Optional

from cronlock.runner import CronRunner

logger = logging.getLogger(__name__)

__all__ = [
    "manage",
    "managed_runners",
    "on_exit",
    "post_fork",
    "post_worker_init",
    "start_all",
    "stop_all",
    "when_ready",
    "worker_exit",
]

DEFAULT_STOP_TIMEOUT = 30.0
# Share of gunicorn's graceful_timeout / timeout a stop may take before the worker is killed.
_TIMEOUT_SHARE = 0.8

_lock = threading.Lock()
_managed: weakref.WeakKeyDictionary[CronRunner, float] = weakref.WeakKeyDictionary()


def manage(runner: CronRunner, *, stop_timeout: float = DEFAULT_STOP_TIMEOUT) -> CronRunner:
    """Put ``runner`` under the hooks' control; returns it.

    The Flask extension does this for its runners. Runners are held weakly: one that is
    garbage-collected drops out.

    Example:
        ```python
        runner = cronlock.gunicorn.manage(CronRunner(client, prefix="myapp"))
        ```
    """
    if not isinstance(runner, CronRunner):
        raise TypeError(f"manage() takes a CronRunner; got {runner!r}")
    with _lock:
        _managed[runner] = float(stop_timeout)
    return runner


def managed_runners() -> list[CronRunner]:
    """The runners the hooks act on, in no particular order."""
    with _lock:
        return list(_managed.keys())


def start_all() -> int:
    """Start every managed runner that is not running; returns how many were started."""
    started = 0
    for runner in managed_runners():
        if not runner.running:
            runner.start()
            started += 1
    return started


def stop_all(timeout: Optional[float] = None) -> None:
    """Stop every running managed runner (each with its own timeout, capped by ``timeout``)."""
    for runner in managed_runners():
        if not runner.running:
            continue
        with _lock:
            own = _managed.get(runner, DEFAULT_STOP_TIMEOUT)
        limit = own if timeout is None else min(own, timeout)
        try:
            runner.stop(timeout=limit)
        except Exception:  # a hook must not break gunicorn's shutdown
            logger.exception("cronlock: could not stop %r", runner)


def _cap(server: Any) -> Optional[float]:
    """The longest stop gunicorn lets a worker take, from its configuration."""
    cfg = getattr(server, "cfg", None)
    limits = [getattr(cfg, name, None) for name in ("graceful_timeout", "timeout")]
    numbers = [float(v) for v in limits if isinstance(v, (int, float)) and v > 0]
    return max(0.5, min(numbers) * _TIMEOUT_SHARE) if numbers else None


# -- the hooks (gunicorn calls them by these names) -------------------------------------


def when_ready(server: Any) -> None:
    """Master, before the first fork: stop runners a preloaded app started here."""
    stopped = [r for r in managed_runners() if r.running]
    if stopped:
        logger.info(
            "cronlock: stopping %d runner(s) in the gunicorn master; jobs run in the workers",
            len(stopped),
        )
        stop_all(timeout=_cap(server))


def post_fork(server: Any, worker: Any) -> None:
    """Worker, just forked: start the runners a preloaded app created in the master."""
    start_all()


def post_worker_init(worker: Any) -> None:
    """Worker, app loaded: start its runners (the case without ``--preload``)."""
    start_all()


def worker_exit(server: Any, worker: Any) -> None:
    """Worker, exiting: stop its runners; running slots are handed over at once."""
    stop_all(timeout=_cap(server))


def on_exit(server: Any) -> None:
    """Master, exiting: stop any runner still running there."""
    stop_all(timeout=_cap(server))
