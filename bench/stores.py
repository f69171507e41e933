"""The same runner on every store, side by side (issue 13): precision, fleet, takeover, burst, cost.

    python bench/stores.py                       # every section on Redis and SQLite
    python bench/stores.py precision fleet --quick
    python bench/stores.py --stores redis,sqlite,postgres --postgres-dsn postgresql://...

Sections (each runs once per store, the stores one after another in the same run):

1. precision: start delay of a 1 s job after its slot boundary (p50/p99) with 4 replica
   processes sharing the store.
2. fleet: 4 replica processes x 100 jobs at 1 s for 60 s (20 s with --quick): slots run
   twice (duplicates) and slots never run (misses).
3. takeover: delay from kill -9 of the running owner to attempt 2 starting elsewhere
   (lease 1.5 s, heartbeat 0.5 s).
4. burst: 1,000 jobs due in the same second on one runner: start delay p50/p99.
5. cost: store round trips (Redis commands; SQL transactions and statements) per
   job-slot for the winner and for each loser, 4 runners in one process.
6. lock: ``store_lock`` acquire + release cycles per second, one thread (median of
   slices; with and without renew), and 4 threads contending for one key with ``wait``.

Redis is a private server started here; SQLite a file in a temporary directory;
PostgreSQL the DSN given (``--postgres-dsn``), in a schema of its own that is dropped.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Callable

import redis

from cronlock import CronRunner, FakeClock, IntervalSchedule, JobContext
from cronlock.stores import RedisStore, SqliteStore, Store, store_lock
from cronlock.testing import RedisServer

Spec = tuple[str, str]  # (kind, where): ("redis", url), ("sqlite", path), ("postgres", dsn)


def open_store(spec: Spec, prefix: str) -> Store:
    kind, where = spec
    if kind == "redis":
        return RedisStore(redis.Redis.from_url(where, socket_timeout=5), prefix=prefix)
    if kind == "sqlite":
        return SqliteStore(where, prefix=prefix)
    from cronlock.stores import PostgresStore  # type: ignore[attr-defined]

    store: Store = PostgresStore(where, prefix=prefix, schema=BENCH_SCHEMA)
    return store


BENCH_SCHEMA = "cronlock_bench_" + uuid.uuid4().hex[:6]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


# -- 1. precision ----------------------------------------------------------------------------


def _precision_replica(spec: Spec, prefix: str, seconds: float, out: Any) -> None:
    delays: list[float] = []

    def handler(ctx: JobContext) -> None:
        delays.append(time.time() - ctx.slot_ms / 1000)

    runner = CronRunner(open_store(spec, prefix))
    runner.add_job(handler, IntervalSchedule(1), key="tick", catch_up=0)
    runner.start()
    time.sleep(seconds)
    runner.stop(timeout=2)
    out.put(delays)


def section_precision(spec: Spec, quick: bool) -> str:
    seconds = 15 if quick else 40
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    prefix = "prec-" + uuid.uuid4().hex[:6]
    procs = [
        ctx.Process(target=_precision_replica, args=(spec, prefix, seconds, out)) for _ in range(4)
    ]
    for p in procs:
        p.start()
    delays = [d * 1000 for _ in procs for d in out.get()]
    for p in procs:
        p.join()
    p50, p99 = percentile(delays, 50), percentile(delays, 99)
    return f"{len(delays)} runs, p50 {p50:.1f} ms, p99 {p99:.1f} ms"


# -- 2. fleet --------------------------------------------------------------------------------


def _fleet_replica(spec: Spec, prefix: str, jobs: int, seconds: float, out: Any) -> None:
    runs: list[tuple[str, int]] = []
    lock = threading.Lock()

    def handler(ctx: JobContext) -> None:
        with lock:
            runs.append((ctx.key, ctx.slot_ms))

    runner = CronRunner(open_store(spec, prefix))
    for i in range(jobs):
        runner.add_job(handler, IntervalSchedule(1), key=f"f{i}", catch_up=1)
    runner.start()
    time.sleep(seconds)
    runner.stop(timeout=5)
    out.put(runs)


def section_fleet(spec: Spec, quick: bool) -> str:
    replicas, jobs, seconds = 4, 100, (20 if quick else 60)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    prefix = "fleet-" + uuid.uuid4().hex[:6]
    started = time.time()
    procs = [
        ctx.Process(target=_fleet_replica, args=(spec, prefix, jobs, seconds, out))
        for _ in range(replicas)
    ]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    runs = [run for result in results for run in result]
    first, last = int(started) + 3, int(started + seconds) - 2  # every replica up
    expected = {(f"f{i}", t * 1000) for t in range(first, last + 1) for i in range(jobs)}
    counted: dict[tuple[str, int], int] = {}
    for run in runs:
        counted[run] = counted.get(run, 0) + 1
    duplicates = sum(n - 1 for n in counted.values() if n > 1)
    missed = len(expected - set(counted))
    per = sorted(sum(1 for run in result if run in expected) for result in results)
    return (
        f"{len(expected)} slots due, {duplicates} duplicates, {missed} misses;"
        f" runs per replica {per}"
    )


# -- 3. takeover -----------------------------------------------------------------------------


def _takeover_replica(spec: Spec, prefix: str, name: str, out: Any, lease: float) -> None:
    runner = CronRunner(open_store(spec, prefix))

    def handler(ctx: JobContext) -> None:
        out.put((name, os.getpid(), ctx.slot_ms, ctx.attempt, time.time()))
        ctx.cancelled.wait(lease * 2)

    runner.add_job(handler, IntervalSchedule(lease * 4), key="long", ttl=lease, catch_up=0.5)
    runner.start()
    signal.sigwait({signal.SIGTERM})
    runner.stop(timeout=2)


def section_takeover(spec: Spec, quick: bool) -> str:
    lease, rounds = 1.5, (3 if quick else 5)
    ctx = mp.get_context("fork")
    events = ctx.Queue()
    prefix = "takeover-" + uuid.uuid4().hex[:6]
    procs: dict[str, Any] = {}
    names = iter(range(1000))

    def spawn() -> None:
        name = f"r{next(names)}"
        procs[name] = ctx.Process(
            target=_takeover_replica, args=(spec, prefix, name, events, lease)
        )
        procs[name].start()

    for _ in range(3):
        spawn()
    delays = []
    try:
        for _ in range(rounds):
            while True:
                name, pid, slot, attempt, _ = events.get(timeout=60)
                if attempt == 1:
                    break
            time.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            killed = time.time()
            procs.pop(name).join()
            while True:
                _, _, slot2, attempt2, started = events.get(timeout=30)
                if (slot2, attempt2) == (slot, 2):
                    delays.append(started - killed)
                    break
            spawn()
    finally:
        for p in procs.values():
            p.terminate()
            p.join()
    bound = lease + lease / 3 + 0.5
    return (
        f"kill -9 -> attempt 2: p50 {percentile(delays, 50):.2f} s, max {max(delays):.2f} s"
        f" (target <= lease + heartbeat + 0.5 = {bound:.2f} s)"
    )


# -- 4. burst --------------------------------------------------------------------------------


def section_burst(spec: Spec, quick: bool) -> str:
    jobs = 300 if quick else 1_000
    delays: list[float] = []
    lock = threading.Lock()
    done = threading.Event()

    def handler(ctx: JobContext) -> None:
        with lock:
            delays.append(time.time() - ctx.slot_ms / 1000)
            if len(delays) >= jobs:
                done.set()

    runner = CronRunner(open_store(spec, "burst-" + uuid.uuid4().hex[:6]), max_workers=64)
    for i in range(jobs):
        runner.add_job(handler, IntervalSchedule(5), key=f"b{i}", catch_up=0)
    runner.start()
    done.wait(30)
    runner.stop(timeout=5)
    ms = [d * 1000 for d in delays[:jobs]]  # the first boundary's runs
    p50, p99 = percentile(ms, 50), percentile(ms, 99)
    return f"{len(ms)} of {jobs} started: p50 {p50:.0f} ms, p99 {p99:.0f} ms"


# -- 5. cost ---------------------------------------------------------------------------------


def section_cost(spec: Spec, quick: bool) -> str:
    """Store calls (one round trip each on Redis, one transaction on SQL) and SQL
    statements per job-slot, counted for 4 runners in one process stepping fake clocks."""
    counts = {"calls": 0, "statements": 0}
    stores = [open_store(spec, "cost-" + uuid.uuid4().hex[:6]) for _ in range(4)]
    for store in stores[1:]:
        store.prefix = stores[0].prefix
    for store in stores:
        _count(store, counts)
    clock = FakeClock(1_800_000_000.0)
    runners = [CronRunner(store, clock=clock) for store in stores]
    for runner in runners:
        for i in range(10):
            runner.add_job(lambda: None, IntervalSchedule(10), key=f"c{i}", catch_up=0)
    slots = 10 if quick else 30
    for n in range(slots):
        clock.set(1_800_000_000.0 + n * 10 + 0.001)
        for runner in runners:
            runner.run_pending()
    job_slots = slots * 10
    text = f"store calls {counts['calls'] / job_slots:.2f} per job-slot"
    if counts["statements"]:
        text += f", SQL statements {counts['statements'] / job_slots:.2f} per job-slot"
    return text + f" (4 runners x 10 jobs, {slots} slots)"


def _count(store: Store, counts: dict[str, int]) -> None:
    """Count the claim path's calls at the store seam, and statements under a backend."""
    for name in ("claim_slots", "renew", "finish", "take_trigger"):
        original: Callable[..., Any] = getattr(store, name)

        def counted(*args: Any, _call: Callable[..., Any] = original, **kwargs: Any) -> Any:
            counts["calls"] += 1
            return _call(*args, **kwargs)

        setattr(store, name, counted)
    backend = getattr(store, "backend", None)
    if backend is None:
        return
    transaction = backend.transaction

    @contextmanager
    def counting() -> Iterator[Any]:
        with transaction() as cur:
            yield _CountingCursor(cur, counts)

    backend.transaction = counting


class _CountingCursor:
    def __init__(self, cur: Any, counts: dict[str, int]) -> None:
        self._cur, self._counts = cur, counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)

    def execute(self, *args: Any) -> Any:
        self._counts["statements"] += 1
        return self._cur.execute(*args)

    def executemany(self, *args: Any) -> Any:
        self._counts["statements"] += 1
        return self._cur.executemany(*args)


# -- 6. lock ---------------------------------------------------------------------------------


def _lock_rate(store: Store, seconds: float, renew: bool) -> float:
    key = "bench-" + uuid.uuid4().hex[:6]
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            store_lock(store, key, ttl=10, renew=renew).acquire().release()
        count += 10
    return count / (time.perf_counter() - start)


def _contended_rate(store: Store, seconds: float, threads: int = 4) -> float:
    key = "bench-" + uuid.uuid4().hex[:6]
    counts = [0] * threads
    stop = threading.Event()

    def worker(i: int) -> None:
        while not stop.is_set():
            with store_lock(store, key, ttl=10, wait=30):
                counts[i] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join(60)
    return sum(counts) / (time.perf_counter() - start)


def section_lock(spec: Spec, quick: bool) -> str:
    """Lock cycles (acquire + release, a fresh key per slice) per second."""
    store = open_store(spec, "lock-" + uuid.uuid4().hex[:6])
    slices, seconds = (3, 0.3) if quick else (9, 0.5)
    _lock_rate(store, 0.2, False)  # warm-up: scripts loaded, tables created
    plain = sorted(_lock_rate(store, seconds, False) for _ in range(slices))[slices // 2]
    renewed = sorted(_lock_rate(store, seconds, True) for _ in range(slices))[slices // 2]
    contended = _contended_rate(store, seconds * 3)
    return (
        f"{plain:,.0f} cycles/s ({1000 / plain:.2f} ms each), renew=True {renewed:,.0f}/s;"
        f" 4 threads on one key with wait: {contended:,.0f} acquisitions/s"
    )


SECTIONS: dict[str, Callable[[Spec, bool], str]] = {
    "precision": section_precision,
    "fleet": section_fleet,
    "takeover": section_takeover,
    "burst": section_burst,
    "cost": section_cost,
    "lock": section_lock,
}


@contextmanager
def stores(kinds: list[str], dsn: str) -> Iterator[list[Spec]]:
    with ExitStack() as stack:
        specs: list[Spec] = []
        for kind in kinds:
            if kind == "redis":
                server = stack.enter_context(RedisServer())
                specs.append(("redis", server.url))
            elif kind == "sqlite":
                directory = stack.enter_context(tempfile.TemporaryDirectory())
                specs.append(("sqlite", os.path.join(directory, "bench.db")))
            elif kind == "postgres":
                if not dsn:
                    raise SystemExit("--stores postgres needs --postgres-dsn")
                specs.append(("postgres", dsn))
            else:
                raise SystemExit(f"unknown store {kind!r}")
        yield specs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sections", nargs="*", default=list(SECTIONS))
    parser.add_argument("--stores", default="redis,sqlite")
    parser.add_argument("--postgres-dsn", default="")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    print(f"# cronlock on every store\n\nPython {sys.version.split()[0]}; {os.cpu_count()} cores\n")
    with stores(args.stores.split(","), args.postgres_dsn) as specs:
        for section in args.sections:
            print(f"\n## {section}\n\n| store | result |\n|---|---|")
            for spec in specs:
                print(f"| {spec[0]} | {SECTIONS[section](spec, args.quick)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
