"""``manage.py dbcheck``: how the runner's threads leave Django's database connections.

Starts the project runner (this command is not one that autostarts), then in the
runner's one worker thread (``MAX_WORKERS: 1``): first ``db-raw``, registered on the
real runner *without* cronlock.django's wrapper, which queries and leaves its
connection open; then ``db-touch`` (from ``ticks/jobs.py``, wrapped). Prints JSON:
whether ``db-raw`` left the thread's connection open, whether ``db-touch`` found it open
when it started, and whether it was closed once ``db-touch`` had finished.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.db import connections
from ticks import jobs

from cronlock.django import runner
from cronlock.schedules import IntervalSchedule


def _wait(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class Command(BaseCommand):
    help = "Report what the runner's threads leave of Django's database connections."

    def handle(self, *args: Any, **options: Any) -> None:
        raw: dict[str, Any] = {}
        raw_done = threading.Event()

        def db_raw() -> None:
            User.objects.count()
            raw["wrapper"] = connections["default"]
            raw["thread"] = threading.get_ident()
            raw_done.set()

        real = runner.runner
        real.add_job(db_raw, IntervalSchedule(3600), key="db-raw")
        runner.start()
        try:
            _wait(lambda: {"db-raw", "db-touch"} <= {j.key for j in real.admin.jobs()})
            real.admin.trigger("db-raw")
            if not raw_done.wait(10):
                raise RuntimeError("db-raw never ran")
            # The raw handler has returned: nothing closed its connection.
            left_open = _wait(lambda: raw["wrapper"].connection is not None, 1)
            real.admin.trigger("db-touch")
            # SEEN gets its entry when the handler starts; wait for the query's note too.
            if not _wait(lambda: bool(jobs.SEEN) and "open_after_query" in jobs.SEEN[0]):
                raise RuntimeError("db-touch never ran its query")
            seen = jobs.SEEN[0]
            closed_after = _wait(lambda: seen["wrapper"].connection is None, 5)
            report = {
                "same_thread_wrapper": seen["wrapper"] is raw["wrapper"],
                "raw_left_open": left_open,
                "open_at_start": seen["open_at_start"],
                "open_after_query": seen.get("open_after_query"),
                "closed_after": closed_after,
            }
        finally:
            runner.stop(timeout=5)
        self.stdout.write(json.dumps(report))
