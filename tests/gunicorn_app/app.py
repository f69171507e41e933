"""The app the gunicorn tests serve: jobs append every start and end to a per-pid file.

Configured from the environment (the test sets it):

* ``GT_REDIS_URL``, ``GT_PREFIX``: where the runners claim slots.
* ``GT_RECORD_DIR``: each process appends JSON lines to ``<dir>/<pid>.jsonl``, in the
  format ``tests.history.History`` reads (``event``, ``job``, ``slot``, ``outcome``, ``t``).
* ``GT_JOBS``: comma-separated ``name:interval_s:duration_s:ttl_s``.
* ``GT_AUTOSTART``: ``1`` sets ``CRONLOCK_AUTOSTART`` (the master starts a runner under
  ``--preload``, and the ``when_ready`` hook must stop it before forking).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from flask import Flask, current_app

from cronlock import JobContext
from cronlock.flask import CronLock
from cronlock.schedules import IntervalSchedule

cronlock = CronLock()
_files: dict[int, Any] = {}
_locks: dict[int, threading.Lock] = {}  # per pid: a lock copied by fork may be held


def log(**fields: Any) -> None:
    """Append one record for this process (flushed at once)."""
    pid = os.getpid()
    fields.update(pid=pid, t=time.time())
    lock = _locks.setdefault(pid, threading.Lock())
    with lock:
        out = _files.get(pid)
        if out is None:
            out = _files[pid] = (Path(os.environ["GT_RECORD_DIR"]) / f"{pid}.jsonl").open(
                "a", buffering=1
            )
        out.write(json.dumps(fields) + "\n")


class _RecordWarnings(logging.Handler):
    """cronlock's warnings and errors go to the record too, to explain a failed check."""

    def emit(self, record: logging.LogRecord) -> None:
        log(event="log", level=record.levelname, message=record.getMessage())


logging.getLogger("cronlock").addHandler(_RecordWarnings(logging.WARNING))


def make_handler(name: str, duration: float) -> Callable[[JobContext], None]:
    def handler(ctx: JobContext) -> None:
        assert current_app.name == "gunicorn_app"  # handlers run in the app context
        log(event="start", job=name, slot=ctx.slot_ms, attempt=ctx.attempt)
        cancelled = ctx.cancelled.wait(duration)
        outcome = "cancelled" if cancelled else "done"
        log(event="end", job=name, slot=ctx.slot_ms, attempt=ctx.attempt, outcome=outcome)
        ctx.check()

    return handler


for spec in filter(None, os.environ.get("GT_JOBS", "").split(",")):
    name, interval, duration, ttl = spec.split(":")
    cronlock.add_job(
        make_handler(name, float(duration)),
        IntervalSchedule(float(interval)),
        key=name,
        ttl=float(ttl),
        catch_up=1.0,
    )

app = Flask("gunicorn_app")
app.config.update(
    CRONLOCK_REDIS_URL=os.environ["GT_REDIS_URL"],
    CRONLOCK_PREFIX=os.environ.get("GT_PREFIX", "gunicorn-test"),
    CRONLOCK_AUTOSTART=os.environ.get("GT_AUTOSTART") == "1",
    CRONLOCK_STOP_TIMEOUT=5,
)
cronlock.init_app(app)


@app.get("/")
def index() -> dict[str, Any]:
    return {"pid": os.getpid(), "running": cronlock.runner.running}
