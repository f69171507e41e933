"""gunicorn configuration: cronlock's hooks start the runner in each worker, stop it on exit."""

from cronlock.gunicorn import (  # noqa: F401 - gunicorn finds the hooks by name
    on_exit,
    post_fork,
    post_worker_init,
    when_ready,
    worker_exit,
)

bind = "127.0.0.1:8000"
workers = 3
graceful_timeout = 30
