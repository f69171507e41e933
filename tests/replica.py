"""A replica process for multi-process tests: one CronRunner, jobs from the command line.

Every handler start and end is appended as a JSON line to ``<record-dir>/<pid>.jsonl``
(flushed at once, so the record survives a kill -9 and a Redis outage)::

    python -m tests.replica redis://127.0.0.1:6400/0 --record-dir DIR \\
        --job fast:1:0.1:3 --job slow:10:4:2 [--offset -0.4] [--prefix p]

A job is ``name:interval_s:duration_s:ttl_s``. The process prints ``ready`` once its
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

from cronlock import CronRunner, JobContext, OffsetClock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--job", action="append", default=[])
    parser.add_argument("--offset", type=float, default=0.0)
    parser.add_argument("--prefix", default="replica-test")
    parser.add_argument("--max-attempts", type=int, default=3)
    args = parser.parse_args(argv)

    record = Path(args.record_dir) / f"{os.getpid()}.jsonl"
    out = record.open("a", buffering=1)
    lock = threading.Lock()

    def log(**fields: Any) -> None:
        fields.update(pid=os.getpid(), t=time.time())
        with lock:
            out.write(json.dumps(fields) + "\n")

    client = redis.Redis.from_url(args.url, socket_timeout=2, socket_connect_timeout=2)
    runner = CronRunner(
        client,
        prefix=args.prefix,
        clock=OffsetClock(args.offset),
        max_attempts=args.max_attempts,
        on_error=lambda e, c: log(event="error", job=c.key, phase=c.phase, error=repr(e)),
    )
    for spec in args.job:
        name, interval, duration, ttl = spec.split(":")
        runner.add_job(
            make_handler(name, float(duration), log),
            _interval(float(interval)),
            key=name,
            ttl=float(ttl),
            catch_up=min(float(interval), 1.0),
        )
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    runner.start()
    log(event="ready")
    print("ready", flush=True)
    stopped.wait()
    runner.stop(timeout=5)
    log(event="stopped")
    return 0


def _interval(seconds: float) -> Any:
    from cronlock.schedules import IntervalSchedule

    return IntervalSchedule(seconds)


def make_handler(
    name: str, duration: float, log: Callable[..., None]
) -> Callable[[JobContext], None]:
    def handler(ctx: JobContext) -> None:
        log(event="start", job=name, slot=ctx.slot_ms, attempt=ctx.attempt, fence=ctx.fencing_token)
        cancelled = ctx.cancelled.wait(duration)
        log(
            event="end",
            job=name,
            slot=ctx.slot_ms,
            attempt=ctx.attempt,
            fence=ctx.fencing_token,
            outcome="cancelled" if cancelled else "done",
        )
        ctx.check()

    return handler


if __name__ == "__main__":
    sys.exit(main())
