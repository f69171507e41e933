"""gunicorn configuration of the Django tests: cronlock's hooks as they are, a record per worker."""

from __future__ import annotations

from typing import Any

from cronlock import gunicorn as cronlock_hooks
from cronlock.gunicorn import on_exit, post_fork, when_ready  # noqa: F401 - gunicorn hooks

graceful_timeout = 20
loglevel = "warning"


def post_worker_init(worker: Any) -> None:
    cronlock_hooks.post_worker_init(worker)
    from ticks.record import log

    log(event="worker", running=[r.running for r in cronlock_hooks.managed_runners()])


def worker_exit(server: Any, worker: Any) -> None:
    cronlock_hooks.worker_exit(server, worker)
    from ticks.record import log

    log(event="worker_exit")
