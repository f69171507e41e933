"""The test app under uWSGI (``tests/integration/test_uwsgi.py``): records each worker.

The app is ``tests/gunicorn_app/app.py`` with autostart on, so the Flask extension
hands its runner to ``cronlock.uwsgi``; ``tests/uwsgi_workers.py`` adds a ``worker``
record when a worker is ready and a ``worker_exit`` record when it exits.
"""

from __future__ import annotations

from tests.gunicorn_app.app import app, log
from tests.uwsgi_workers import record_workers

__all__ = ["app"]

record_workers(log)
