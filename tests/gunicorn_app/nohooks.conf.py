"""gunicorn configuration without cronlock's hooks: only a record of each worker.

With ``--preload`` and autostart, the master's runner keeps running and each worker
inherits a copy that the runner's own fork handler restarts (``after_fork="restart"``).
"""

from __future__ import annotations

from typing import Any

bind = "127.0.0.1:0"
graceful_timeout = 20
loglevel = "warning"


def post_worker_init(worker: Any) -> None:
    from cronlock import gunicorn as cronlock_hooks
    from tests.gunicorn_app.app import log

    log(event="worker", running=[r.running for r in cronlock_hooks.managed_runners()])
