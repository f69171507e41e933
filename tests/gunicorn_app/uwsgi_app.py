"""The test app under uWSGI (``tests/integration/test_uwsgi.py``): records each worker.

The app is ``tests/gunicorn_app/app.py`` with autostart on, so the Flask extension
hands its runner to ``cronlock.uwsgi``. This module adds a ``worker`` record when a
worker is ready (after cronlock's post-fork hook, or at import with ``lazy-apps``) and
a ``worker_exit`` record after cronlock's exit hook has stopped the runner.
"""

from __future__ import annotations

import os

import uwsgi  # type: ignore[import-not-found]  # only inside uWSGI
from uwsgidecorators import postfork  # type: ignore[import-not-found]

from cronlock import gunicorn as cronlock_hooks
from tests.gunicorn_app.app import app, log

__all__ = ["app"]


def _worker_ready() -> None:
    running = [r.running for r in cronlock_hooks.managed_runners()]
    log(event="worker", wid=uwsgi.worker_id(), master=uwsgi.masterpid(), running=running)


if uwsgi.worker_id() > 0:  # lazy-apps: imported in the worker, after the fork
    _worker_ready()
else:  # imported in the master; registered after cronlock's hook, so it runs after it
    postfork(_worker_ready)

_previous = getattr(uwsgi, "atexit", None)


def _worker_exit() -> None:
    if _previous is not None:
        _previous()  # cronlock's: stops the runner, hands running slots over
    log(event="worker_exit", wid=uwsgi.worker_id(), ppid=os.getppid())


uwsgi.atexit = _worker_exit
