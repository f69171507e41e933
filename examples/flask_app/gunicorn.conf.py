"""gunicorn settings for the example: cronlock's hooks run the jobs in the workers."""

import os

from cronlock.gunicorn import (  # noqa: F401 - gunicorn looks the hooks up by name
    on_exit,
    post_fork,
    post_worker_init,
    when_ready,
    worker_exit,
)

bind = f"127.0.0.1:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "4"))
# worker_exit stops the runner within 80% of the smaller of these two (handing over
# any slot still running), so give long jobs room to notice ctx.cancelled.
graceful_timeout = 30
timeout = 30
# Recycle workers now and then; a job cut short is handed over, not left to its lease.
max_requests = 1000
max_requests_jitter = 100
