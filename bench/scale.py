"""Fleet scale benchmark (issue 16): what a job-slot costs as the fleet grows.

    python bench/scale.py --quick                        # R in {2, 8} x J in {10, 100}, 20 s each
    python bench/scale.py                                # R in {2, 8, 24} x J in {10, 100, 1000}
    python bench/scale.py --quick --before /path/to/old/checkout   # before/after interleaved

R replica processes each register the same J interval jobs at 1 s (no-op handlers,
history on, a 5 s lease by default: a loser's re-check of a slot falls due 5 s after
its claim, inside the window, where the default 60 s lease would put it after the
window) against one private Redis server started here; after a warm-up the figures
cover a window of whole seconds, and every job-slot in it counts:

* server CPU per job-slot: ``INFO cpu`` (sys + user) over the window / (J x seconds);
* server commands and EVALSHA per job-slot: ``INFO commandstats`` over the window;
* round trips per replica per tick: packed commands each replica sent (a pipeline is
  one) / seconds (every job is due once a second, so a tick is a second);
* client CPU per replica per job-slot: each replica's process CPU over the window;
* start delay p50/p99: handler start after the slot boundary, every run in the window;
* duplicates (a job-slot run more than once) and misses (a job-slot run nowhere).

``naive`` is the fleet many teams start with: APScheduler 3 in every replica and a
redis-py ``Lock`` per job (``blocking=False``, released when the handler returns).
``--before PATH`` runs each point also with the cronlock found in PATH (an older
checkout), alternating before and after, so the two columns share the machine's load;
``--after PATH`` takes the after column from another checkout than this one.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import threading
import time
from typing import Any

import redis


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


class CountingConnection(redis.Connection):
    """Counts round trips: one per packed command sent (a pipeline is one)."""

    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        type(self).sent += 1
        super().send_packed_command(command, check_health)


def _wait_until(t: float) -> None:
    while (left := t - time.time()) > 0:
        time.sleep(min(left, 0.5))


def _replica(kind: str, url: str, jobs: int, window: tuple[float, float, int], out: Any) -> None:
    """One replica: run the fleet's jobs until after ``window``; report runs, CPU, round trips.

    ``kind`` is "naive" or the checkout to import cronlock from ("" for this one); this
    module imports no cronlock at the top, so the choice is made here.
    """
    t0, t1, ttl = window
    if kind not in ("naive", ""):
        sys.path.insert(0, kind)
    pool = redis.ConnectionPool.from_url(url, connection_class=CountingConnection)
    client = redis.Redis(connection_pool=pool, socket_timeout=5)
    runs: list[tuple[int, int, float]] = []  # (job index, slot ms, delay s)
    lock = threading.Lock()
    stop: Any
    if kind == "naive":
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.interval import IntervalTrigger

        sched = BackgroundScheduler(job_defaults={"misfire_grace_time": 1, "coalesce": True})

        def naive_job(i: int) -> None:
            now = time.time()
            slot = int(now)
            held = client.lock(f"naive:{i}", timeout=60, blocking=False)
            if held.acquire():
                try:
                    with lock:
                        runs.append((i, slot * 1000, now - slot))
                finally:
                    held.release()

        start = int(time.time()) + 1
        from datetime import datetime, timezone

        for i in range(jobs):
            sched.add_job(
                naive_job,
                IntervalTrigger(seconds=1, start_date=datetime.fromtimestamp(start, timezone.utc)),
                args=(i,),
            )
        sched.start()
        stop = lambda: sched.shutdown(wait=False)  # noqa: E731
    else:
        from cronlock import CronRunner, IntervalSchedule, JobContext

        runner = CronRunner(client, prefix="scale")

        def make(i: int) -> Any:
            def handler(ctx: JobContext) -> None:
                now = time.time()
                with lock:
                    runs.append((i, ctx.slot_ms, now - ctx.slot_ms / 1000))

            return handler

        for i in range(jobs):
            runner.add_job(make(i), IntervalSchedule(1), key=f"j{i}", catch_up=1, ttl=ttl)
        runner.start()
        stop = lambda: runner.stop(timeout=2)  # noqa: E731
    _wait_until(t0)
    cpu0, sent0 = time.process_time(), CountingConnection.sent
    _wait_until(t1)
    cpu1, sent1 = time.process_time(), CountingConnection.sent
    time.sleep(1.0)  # the window's last slots finish
    stop()
    import cronlock

    out.put({"cpu": cpu1 - cpu0, "sent": sent1 - sent0, "runs": runs, "src": cronlock.__file__})


def _server_sample(client: redis.Redis) -> tuple[float, dict[str, int]]:
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]), calls


def measure(
    kind: str, replicas: int, jobs: int, seconds: int, *, checkout: str, ttl: int
) -> dict[str, float]:
    """One grid point on a fresh server: the figures of the module docstring."""
    from cronlock.testing import RedisServer

    if kind != "naive":
        kind = checkout  # what the replicas import cronlock from
    with RedisServer() as server:
        client = server.client()
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        warmup = 4 + replicas * 0.4 + jobs / 500
        t0 = float(int(time.time() + warmup) + 1)
        t1 = t0 + seconds
        procs = [
            ctx.Process(target=_replica, args=(kind, server.url, jobs, (t0, t1, ttl), out))
            for _ in range(replicas)
        ]
        for p in procs:
            p.start()
        _wait_until(t0)
        cpu0, calls0 = _server_sample(client)
        _wait_until(t1)
        cpu1, calls1 = _server_sample(client)
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(30)
    # the replicas ran the checkout asked for (``--before``), not this one
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert all(r["src"].startswith(checkout or here) for r in results), results[0]["src"]
    slots = jobs * seconds
    window = range(int(t0 * 1000), int(t1 * 1000), 1000)
    counts: dict[tuple[int, int], int] = {}
    delays = []
    for r in results:
        for i, slot, delay in r["runs"]:
            if slot in window:
                counts[(i, slot)] = counts.get((i, slot), 0) + 1
                delays.append(delay * 1000)
    calls = {k: v - calls0.get(k, 0) for k, v in calls1.items()}
    calls.pop("info", None)
    return {
        "server_us": (cpu1 - cpu0) * 1e6 / slots,
        "commands": sum(calls.values()) / slots,
        "evalsha": calls.get("evalsha", 0) / slots,
        "rtt_tick": sum(r["sent"] for r in results) / replicas / seconds,
        "client_us": sum(r["cpu"] for r in results) / replicas * 1e6 / slots,
        "p50": percentile(delays, 50),
        "p99": percentile(delays, 99),
        "duplicates": sum(1 for n in counts.values() if n > 1),
        "missed": slots - len(counts),
        "slots": slots,
    }


def row(label: str, r: int, j: int, m: dict[str, float]) -> str:
    return (
        f"| {r} x {j:,} | {label} | {m['server_us']:.0f} | {m['commands']:.1f} "
        f"| {m['evalsha']:.2f} | {m['rtt_tick']:.1f} | {m['client_us']:.0f} "
        f"| {m['p50']:.1f} / {m['p99']:.1f} | {m['duplicates']:.0f} "
        f"| {m['missed']:.0f} of {m['slots']:,.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="R in {2, 8} x J in {10, 100}")
    parser.add_argument("--seconds", type=int, default=None, help="window per point")
    parser.add_argument("--replicas", type=int, action="append", help="R (repeatable)")
    parser.add_argument("--jobs", type=int, action="append", help="J (repeatable)")
    parser.add_argument("--before", default="", help="an older checkout: its column too")
    parser.add_argument("--after", default="", help="the checkout of the after column")
    parser.add_argument("--ttl", type=int, default=5, help="the jobs' lease, s (default 5)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive fleet")
    args = parser.parse_args(argv)
    replicas = args.replicas or ([2, 8] if args.quick else [2, 8, 24])
    jobs = args.jobs or ([10, 100] if args.quick else [10, 100, 1000])
    seconds = args.seconds or (20 if args.quick else 30)
    load = os.getloadavg()
    print(
        f"# cronlock fleet scale\n\nredis-py {redis.__version__}; Python "
        f"{sys.version.split()[0]}; {os.cpu_count()} cores; load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start; {seconds} s per point; "
        f"lease {args.ttl} s\n"
    )
    print(
        "| R x J | fleet | server CPU µs/job-slot | server cmds/job-slot | EVALSHA/job-slot "
        "| round trips/replica/tick | client CPU µs/replica/job-slot | start delay p50 / p99 ms "
        "| duplicates | missed |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    points: list[dict[str, Any]] = []
    for r in replicas:
        for j in jobs:
            kinds = [("before", args.before)] if args.before else []
            kinds.append(("after" if args.before else "cronlock", args.after))
            if not args.no_naive:
                kinds.append(("naive", ""))
            for label, checkout in kinds:
                kind = "naive" if label == "naive" else "cronlock"
                m = measure(kind, r, j, seconds, checkout=checkout, ttl=args.ttl)
                print(row(label, r, j, m), flush=True)
                points.append({"replicas": r, "jobs": j, "fleet": label, **m})
                if args.json:  # after every point: a long run keeps what it measured
                    with open(args.json, "w", encoding="utf-8") as f:
                        json.dump({"seconds": seconds, "ttl": args.ttl, "points": points}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
