"""Inside a uWSGI test server: a record when each worker is ready and when it exits.

Imported by the modules uWSGI serves in the tests (``tests/gunicorn_app/uwsgi_app.py``,
``tests/django_project/dtproject/uwsgi_app.py``) after the app, so after cronlock's
hooks are installed; importable only inside uWSGI.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import uwsgi  # type: ignore[import-not-found]  # only inside uWSGI
from uwsgidecorators import postfork  # type: ignore[import-not-found]

from cronlock import gunicorn as cronlock_hooks


def record_workers(log: Callable[..., Any]) -> None:
    """Make ``log`` write a ``worker`` and a ``worker_exit`` record in every worker.

    ``worker`` (worker id, master pid, whether each managed runner runs) when the worker
    is ready: after cronlock's post-fork hook, or at once with ``lazy-apps`` (this
    module is then imported in the worker). ``worker_exit`` after cronlock's exit hook
    has stopped the runner.
    """

    def worker_ready() -> None:
        running = [r.running for r in cronlock_hooks.managed_runners()]
        log(event="worker", wid=uwsgi.worker_id(), master=uwsgi.masterpid(), running=running)

    if uwsgi.worker_id() > 0:  # lazy-apps: imported in the worker, after the fork
        worker_ready()
    else:  # imported in the master; registered after cronlock's hook, so it runs after it
        postfork(worker_ready)

    previous = getattr(uwsgi, "atexit", None)

    def worker_exit() -> None:
        if previous is not None:
            previous()  # cronlock's: stops the runner, hands running slots over
        log(event="worker_exit", wid=uwsgi.worker_id(), ppid=os.getppid())

    uwsgi.atexit = worker_exit
