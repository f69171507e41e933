"""What uWSGI serves in the Django tests: ``dtproject.wsgi:application``, a record per worker.

Importing ``dtproject.wsgi`` sets Django up, so ``cronlock.django`` hands its runner to
``cronlock.uwsgi`` (autostart on); ``tests/uwsgi_workers.py`` then adds a ``worker``
record when each worker is ready and a ``worker_exit`` record when it exits.
"""

from __future__ import annotations

from dtproject.wsgi import application
from ticks.record import log

from tests.uwsgi_workers import record_workers

__all__ = ["application"]

record_workers(log)
