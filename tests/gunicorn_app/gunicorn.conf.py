"""gunicorn configuration for the tests: cronlock's hooks, plus a record of each worker."""

from __future__ import annotations

from typing import Any

from cronlock import gunicorn as cronlock_hooks
from cronlock.gunicorn import on_exit, post_fork, when_ready  # noqa: F401 - gunicorn hooks

bind = "127.0.0.1:0"
graceful_timeout = 20
loglevel = "warning"


def post_worker_init(worker: Any) -> None:
    cronlock_hooks.post_worker_init(worker)
    from tests.gunicorn_app.app import log

    log(event="worker", running=[r.running for r in cronlock_hooks.managed_runners()])


def worker_exit(server: Any, worker: Any) -> None:
    cronlock_hooks.worker_exit(server, worker)
    from tests.gunicorn_app.app import log

    log(event="worker_exit")
