"""A replica process for multi-process tests: one CronRunner, jobs from the command line.

Every handler start and end is appended as a JSON line to ``<record-dir>/<pid>.jsonl``
(flushed at once, so the record survives a kill -9 and a Redis outage)::

    python -m tests.replica redis://127.0.0.1:6400/0 --record-dir DIR \\
        --job fast:1:0.1:3 --job slow:10:4:2 [--offset -0.4] [--prefix p]

A job is ``name:interval_s:duration_s:ttl_s``; ``--many name:interval:duration:ttl:N``
registers N such jobs ``name0`` .. ``name{N-1}``. The process prints ``ready`` once its
runner has started, and stops gracefully on SIGTERM.

Besides ``start``/``end`` (one per handler call) and ``error`` (``on_error``), the
replica records what the fault checker needs to know about leases, observed at the
``RedisStore`` call boundary (the store seam) (nothing about Redis is faked):

* ``claim``: a won claim - job, slot, owner, attempt, fence and ``lease`` (the lease
  deadline on Redis's clock, epoch ms);
* ``renew``: a renewal that succeeded - job, slot, owner and the new ``lease``;
* ``finish``: the runner recording a run's end - outcome and ``ok`` (False: refused,
  the slot was no longer this owner's).

Redis runs on the same host in these tests, so its ``TIME`` and ``time.time()`` here are
the same clock (an ``--offset`` skews only the runner's clock, never the records).
Topology: a URL (``redis://``, ``rediss://``, a proxy's URL), ``--sentinel
host:port,host:port --service NAME``, or ``--cluster`` (the URL is one node). A
``postgresql://`` URL runs the replica on a `PostgresStore` and a ``sqlite:///`` URL on a
`SqliteStore` instead (its calls wait at
most ``--store-timeout`` seconds); PostgreSQL's ``clock_timestamp()`` is this host's
clock too.
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

RecordFn = Callable[..., None]


class JumpingClock(OffsetClock):
    """A wall clock that jumps: ``+amount`` for ``period`` seconds, then ``-amount``, ...

    What NTP stepping a badly drifted clock, or a VM resumed from a snapshot, looks like
    to a replica. The monotonic clock is untouched.
    """

    def __init__(self, offset: float, period: float, amount: float) -> None:
        super().__init__(offset)
        self.period = period
        self.amount = amount

    def time(self) -> float:
        now = time.time()
        sign = 1 if int(now / self.period) % 2 == 0 else -1
        return now + self.offset + sign * self.amount


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--job", action="append", default=[])
    parser.add_argument("--many", action="append", default=[])
    parser.add_argument("--offset", type=float, default=0.0)
    parser.add_argument("--jump", default="", help="PERIOD:AMOUNT, a clock that jumps")
    parser.add_argument("--prefix", default="replica-test")
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--catch-up", type=float, default=None)
    parser.add_argument("--socket-timeout", type=float, default=2.0)
    parser.add_argument(
        "--retries", type=int, default=None, help="redis-py retries (default: its own policy)"
    )
    parser.add_argument("--sentinel", default="", help="host:port,... of the sentinels")
    parser.add_argument("--service", default="mymaster")
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--wait-replicas", type=int, default=0)
    parser.add_argument("--wait-timeout", type=float, default=1.0)
    parser.add_argument("--store-timeout", type=float, default=2.0, help="PostgresStore timeout")
    args = parser.parse_args(argv)

    record = Path(args.record_dir) / f"{os.getpid()}.jsonl"
    out = record.open("a", buffering=1)
    lock = threading.Lock()

    def log(**fields: Any) -> None:
        fields.update(pid=os.getpid(), t=time.time())
        with lock:
            out.write(json.dumps(fields) + "\n")

    client = make_client(args)
    clock = OffsetClock(args.offset)
    if args.jump:
        period, amount = (float(x) for x in args.jump.split(":"))
        clock = JumpingClock(args.offset, period, amount)
    record_leases(log, type(client) if hasattr(client, "claim_slots") else None)
    runner = CronRunner(
        client,
        prefix=args.prefix,
        clock=clock,
        max_attempts=args.max_attempts,
        wait_replicas=args.wait_replicas,
        wait_timeout=args.wait_timeout,
        on_error=lambda e, c: log(
            event="error", job=c.key, phase=c.phase, slot=c.slot_ms, error=repr(e)
        ),
    )
    specs = list(args.job)
    for spec in args.many:
        name, rest = spec.split(":", 1)
        *fields, count = rest.split(":")
        specs += [":".join([f"{name}{i}", *fields]) for i in range(int(count))]
    for spec in specs:
        name, interval, duration, ttl = spec.split(":")
        catch_up = min(float(interval), 1.0) if args.catch_up is None else args.catch_up
        runner.add_job(
            make_handler(name, float(duration), log),
            _interval(float(interval)),
            key=name,
            ttl=float(ttl),
            catch_up=catch_up,
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


def make_client(args: argparse.Namespace) -> Any:
    """The redis-py client for the topology the arguments name (a store for PostgreSQL)."""
    if args.url.startswith(("postgresql://", "postgres://")):
        from cronlock.stores.postgres import PostgresStore

        return PostgresStore(args.url, args.prefix, timeout=args.store_timeout)
    if args.url.startswith("sqlite:"):
        from cronlock.stores import from_url

        return from_url(args.url, prefix=args.prefix, busy_timeout=args.store_timeout)
    timeouts: dict[str, Any] = {
        "socket_timeout": args.socket_timeout,
        "socket_connect_timeout": 1.0,
    }
    if args.retries is not None:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        timeouts["retry"] = Retry(NoBackoff(), args.retries)
    if args.sentinel:
        from redis.sentinel import Sentinel

        nodes = [(h, int(p)) for h, p in (n.split(":") for n in args.sentinel.split(","))]
        sentinel = Sentinel(nodes, sentinel_kwargs=timeouts, **timeouts)
        return sentinel.master_for(args.service)
    if args.cluster:
        from redis.cluster import RedisCluster

        return RedisCluster.from_url(args.url, **timeouts)
    return redis.Redis.from_url(args.url, **timeouts)


def record_leases(log: RecordFn, store_class: Any = None) -> None:
    """Record won claims and successful renewals (wraps the methods of ``store_class``,
    default `RedisStore`, that the runner calls; the calls themselves are unchanged)."""
    from cronlock.errors import FinishNotReplicated
    from cronlock.stores import ClaimReply, ClaimStatus, RedisStore

    cls = store_class or RedisStore
    claim_slots, renew, finish = cls.claim_slots, cls.renew, cls.finish

    def claim_logged(self: RedisStore, claims: Any, *args: Any) -> Any:
        replies = claim_slots(self, claims, *args)
        for claim, reply in zip(claims, replies):
            if isinstance(reply, ClaimReply) and reply.status == ClaimStatus.WON:
                log(
                    event="claim",
                    job=claim.key,
                    slot=claim.slot_ms,
                    owner=claim.owner,
                    attempt=reply.attempt,
                    fence=reply.fence,
                    lease=reply.lease_until_ms,
                    lease_ms=claim.lease_ms,
                )
        return replies

    def renew_logged(
        self: RedisStore, key: str, slot_ms: int, owner: str, *args: Any, **kwargs: Any
    ) -> int | None:
        until = renew(self, key, slot_ms, owner, *args, **kwargs)
        if until is not None:
            log(event="renew", job=key, slot=slot_ms, owner=owner, lease=until)
        return until

    def finish_logged(
        self: RedisStore, key: str, slot_ms: int, owner: str, outcome: str, **kwargs: Any
    ) -> bool:
        try:
            ok = finish(self, key, slot_ms, owner, outcome, **kwargs)
        except FinishNotReplicated:  # recorded on the master all the same
            log(event="finish", job=key, slot=slot_ms, owner=owner, outcome=outcome, ok=True)
            raise
        log(event="finish", job=key, slot=slot_ms, owner=owner, outcome=outcome, ok=ok)
        return ok

    cls.claim_slots = claim_logged
    cls.renew = renew_logged
    cls.finish = finish_logged


def _interval(seconds: float) -> Any:
    from cronlock.schedules import IntervalSchedule

    return IntervalSchedule(seconds)


def make_handler(name: str, duration: float, log: RecordFn) -> Callable[[JobContext], None]:
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
