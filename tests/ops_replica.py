"""A replica process for the operations tests: jobs, named tasks, a foreground runner.

Every handler start and end is appended as a JSON line to ``<record-dir>/<pid>.jsonl``
(the format :class:`tests.history.History` reads)::

    python -m tests.ops_replica redis://127.0.0.1:6400/0 --record-dir DIR \\
        --job hourly:3600:0.2 --task reindex:0.1 [--prefix p] [--poll-interval 30]

A job is ``name:interval_s:duration_s``; a task is ``name:duration_s``, registered with
``@runner.task(name)`` for dynamic schedules. The process prints ``ready`` once its
runner has started, and stops gracefully on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import redis

from cronlock import CronRunner, JobContext
from cronlock.schedules import IntervalSchedule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--job", action="append", default=[])
    parser.add_argument("--task", action="append", default=[])
    parser.add_argument("--prefix", default="ops-test")
    parser.add_argument("--poll-interval", type=float, default=2.0)
    args = parser.parse_args(argv)

    out = (Path(args.record_dir) / f"{os.getpid()}.jsonl").open("a", buffering=1)
    lock = threading.Lock()

    def log(**fields: Any) -> None:
        fields.update(pid=os.getpid(), t=time.time())
        with lock:
            out.write(json.dumps(fields) + "\n")

    client = redis.Redis.from_url(args.url, socket_timeout=2, socket_connect_timeout=2)
    runner = CronRunner(
        client,
        prefix=args.prefix,
        default_ttl=10,
        poll_interval=args.poll_interval,
        on_error=lambda e, c: log(event="error", job=c.key, phase=c.phase, error=repr(e)),
    )
    for spec in args.job:
        name, interval, duration = spec.split(":")
        runner.add_job(
            handler(name, float(duration), log), IntervalSchedule(float(interval)), key=name
        )
    for spec in args.task:
        name, duration = spec.split(":")
        runner.task(name)(handler(name, float(duration), log))
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    runner.start()
    log(event="ready", runner=runner.runner_id)
    print("ready", flush=True)
    stopped.wait()
    runner.stop(timeout=5)
    log(event="stopped")
    return 0


def handler(name: str, duration: float, log: Callable[..., None]) -> Callable[[JobContext], None]:
    def run(ctx: JobContext) -> None:
        log(
            event="start",
            job=ctx.key,
            task=name,
            slot=ctx.slot_ms,
            fence=ctx.fencing_token,
            attempt=ctx.attempt,
            payload=ctx.payload,
        )
        ctx.cancelled.wait(duration)
        log(
            event="end",
            job=ctx.key,
            task=name,
            slot=ctx.slot_ms,
            attempt=ctx.attempt,
            fence=ctx.fencing_token,
            outcome="done",
        )

    return run


if __name__ == "__main__":
    sys.exit(main())
