"""Runner benchmarks (issue 3), with the comparison measured in the same run.

    python bench/runner.py            # everything, ~3 minutes
    python bench/runner.py --quick    # smaller sizes and fewer slots, ~1 minute
    python bench/runner.py idle precision commands takeover burst replication fleet

Sections:

1. idle: idle CPU per wall second, registration time and memory per job for 100 ...
   100,000 jobs in one runner; ``schedule`` (a ``run_pending()`` loop every second, as
   its docs suggest) and APScheduler 3 ``BackgroundScheduler`` alongside.
2. precision: start delay of a 1 s job after the slot boundary (p50/p99/max) for one
   runner and for 4 replica processes, with APScheduler 3 ``CronTrigger(second="*")``
   running in the same window as the reference.
3. commands: Redis round trips per slot for the winner and each loser, 4 replicas.
4. takeover: delay from kill -9 of the running owner to attempt 2 starting elsewhere.
5. burst: 1,000 and 10,000 jobs due in the same second (--quick: 1,000), twice (jobs
   that never ran on the runner, then the same jobs again): the handlers' start delays.
6. replication: what ``wait_replicas=1`` costs a slot (claim + WAIT in one pipeline,
   then the finish) against a master with one replica on loopback, interleaved with the
   same slots claimed without it.
7. fleet: 20 replica processes x 200 jobs of 0.5 s every 5 s: slots run, slots missed
   and how the runs spread over the replicas.

APScheduler 3 is installed for the benchmark only (``pip install "apscheduler<4"``).
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import signal
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

import redis

from cronlock import CronRunner, FakeClock, IntervalSchedule, JobContext
from cronlock.testing import RedisServer

DAY = 86_400


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


@contextmanager
def cpu_window(seconds: float) -> Iterator[dict[str, float]]:
    """Measure process CPU seconds over ``seconds`` of wall time spent idle in this thread."""
    result: dict[str, float] = {}
    gc.collect()
    cpu0, wall0 = time.process_time(), time.monotonic()
    yield result
    time.sleep(seconds)
    result["cpu_ms_per_s"] = (time.process_time() - cpu0) * 1000 / (time.monotonic() - wall0)


# -- 1. idle ------------------------------------------------------------------------------


def far_interval() -> IntervalSchedule:
    """A daily slot 12 h away: nothing is due (or within catch-up) during the window."""
    offset = (time.time() + DAY / 2) % DAY
    return IntervalSchedule(DAY, offset=offset)


def bench_cronlock_idle(client: redis.Redis, n: int, window: float) -> dict[str, float]:
    schedule = far_interval()
    runner = CronRunner(client, prefix="bench-idle")
    fns = [lambda: None for _ in range(n)]
    half = n // 2
    t0 = time.perf_counter()
    for i, fn in enumerate(fns[:half]):
        runner.add_job(fn, schedule, key=f"job-{i}")
    reg = (time.perf_counter() - t0) / half
    tracemalloc.start()  # memory measured apart: tracemalloc slows allocation several fold
    for i, fn in enumerate(fns[half:], half):
        runner.add_job(fn, schedule, key=f"job-{i}")
    mem = tracemalloc.get_traced_memory()[0] / (n - half)
    tracemalloc.stop()
    runner.start()
    # Start-up (seeding one slot per job, registering every job once) is not idle: wait
    # for the operations thread's first sync, then a moment for the scheduler to sleep.
    deadline = time.monotonic() + 120
    while runner._ops.last_sync is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    with cpu_window(window) as cpu:
        pass
    runner.stop(timeout=5)
    return {"reg_us": reg * 1e6, "mem_bytes": mem, **cpu}


def bench_schedule_idle(n: int, window: float) -> dict[str, float]:
    import schedule

    sched = schedule.Scheduler()
    half = n // 2
    t0 = time.perf_counter()
    for _ in range(half):
        sched.every(1).days.do(lambda: None)
    reg = (time.perf_counter() - t0) / half
    tracemalloc.start()
    for _ in range(n - half):
        sched.every(1).days.do(lambda: None)
    mem = tracemalloc.get_traced_memory()[0] / (n - half)
    tracemalloc.stop()
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            sched.run_pending()
            stop.wait(1)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    with cpu_window(window) as cpu:
        pass
    stop.set()
    thread.join()
    return {"reg_us": reg * 1e6, "mem_bytes": mem, **cpu}


def bench_apscheduler_idle(n: int, window: float) -> dict[str, float]:
    from apscheduler.schedulers.background import BackgroundScheduler

    sched = BackgroundScheduler()
    sched.start()
    half = n // 2
    t0 = time.perf_counter()
    for i in range(half):
        sched.add_job(lambda: None, "interval", days=1, id=f"job-{i}")
    reg = (time.perf_counter() - t0) / half
    tracemalloc.start()
    for i in range(half, n):
        sched.add_job(lambda: None, "interval", days=1, id=f"job-{i}")
    mem = tracemalloc.get_traced_memory()[0] / (n - half)
    tracemalloc.stop()
    time.sleep(0.5)
    with cpu_window(window) as cpu:
        pass
    sched.shutdown(wait=False)
    return {"reg_us": reg * 1e6, "mem_bytes": mem, **cpu}


def section_idle(client: redis.Redis, quick: bool) -> None:
    sizes = [100, 1_000, 10_000] if quick else [100, 1_000, 10_000, 100_000]
    window = 2.0 if quick else 4.0
    with cpu_window(window) as base:
        pass
    print("\n## 1. Idle cost and registration\n")
    idle_base = base["cpu_ms_per_s"]
    print(f"this process doing nothing: {idle_base:.3f} ms CPU per wall second\n")
    print(
        "| jobs | cronlock CPU ms/s | schedule CPU ms/s | APScheduler 3 CPU ms/s "
        "| cronlock reg µs/job | schedule reg µs/job | APScheduler reg µs/job "
        "| cronlock B/job | schedule B/job | APScheduler B/job |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        c = bench_cronlock_idle(client, n, window)
        s = bench_schedule_idle(n, window)
        a = bench_apscheduler_idle(n, window)
        print(
            f"| {n:,} | {c['cpu_ms_per_s']:.3f} | {s['cpu_ms_per_s']:.3f} "
            f"| {a['cpu_ms_per_s']:.3f} "
            f"| {c['reg_us']:.1f} | {s['reg_us']:.1f} | {a['reg_us']:.1f} "
            f"| {c['mem_bytes']:.0f} | {s['mem_bytes']:.0f} | {a['mem_bytes']:.0f} |",
            flush=True,
        )


# -- 2. precision -------------------------------------------------------------------------


def _precision_replica(url: str, slots: int, out: Any, prefix: str) -> None:
    client = redis.Redis.from_url(url, socket_timeout=5)
    delays: list[float] = []
    done = threading.Event()

    def handler(ctx: JobContext) -> None:
        delays.append(time.time() - ctx.slot_ms / 1000)
        if len(delays) >= slots:
            done.set()

    runner = CronRunner(client, prefix=prefix)
    # catch_up=0: a slot that began before this replica started is not run late, so the
    # figures measure steady-state precision rather than start-up catch-up.
    runner.add_job(handler, IntervalSchedule(1), key="tick", catch_up=0)
    runner.start()
    done.wait(slots * 2 + 10)
    runner.stop(timeout=2)
    out.put(delays)


def _apscheduler_precision(slots: int, out: Any) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger

    delays: list[float] = []
    done = threading.Event()

    def tick() -> None:
        now = time.time()
        delays.append(now - int(now))
        if len(delays) >= slots:
            done.set()

    sched = BackgroundScheduler()
    sched.add_job(tick, CronTrigger(second="*"))
    sched.start()
    done.wait(slots * 2 + 10)
    sched.shutdown(wait=False)
    out.put(delays)


def section_precision(url: str, quick: bool) -> None:
    slots = 20 if quick else 60
    print(f"\n## 2. Scheduling precision ({slots} slots of a 1 s job, all measured together)\n")
    ctx = mp.get_context("spawn")
    queues = {
        name: ctx.Queue() for name in ("cronlock 1 replica", "cronlock 4 replicas", "APScheduler 3")
    }
    procs = [
        ctx.Process(
            target=_precision_replica, args=(url, slots, queues["cronlock 1 replica"], "p1")
        )
    ]
    procs += [
        ctx.Process(
            target=_precision_replica,
            args=(url, slots // 4 + 2, queues["cronlock 4 replicas"], "p4"),
        )
        for _ in range(4)
    ]
    procs.append(ctx.Process(target=_apscheduler_precision, args=(slots, queues["APScheduler 3"])))
    for p in procs:
        p.start()
    results: dict[str, list[float]] = {}
    results["cronlock 1 replica"] = queues["cronlock 1 replica"].get()
    results["cronlock 4 replicas"] = [
        d for _ in range(4) for d in queues["cronlock 4 replicas"].get()
    ]
    results["APScheduler 3"] = queues["APScheduler 3"].get()
    for p in procs:
        p.join()
    print("| scheduler | runs | p50 ms | p99 ms | max ms | drift (last 10 vs first 10, ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, delays in results.items():
        ms = [d * 1000 for d in delays]
        drift = (
            statistics.mean(ms[-10:]) - statistics.mean(ms[:10]) if len(ms) >= 20 else float("nan")
        )
        print(
            f"| {name} | {len(ms)} | {percentile(ms, 50):.2f} | {percentile(ms, 99):.2f} "
            f"| {max(ms):.2f} | {drift:+.2f} |"
        )


# -- 3. commands per slot -----------------------------------------------------------------


class CountingConnection(redis.Connection):
    """Counts round trips: one per packed command sent (a pipeline is one)."""

    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        type(self).sent += 1
        super().send_packed_command(command, check_health)


def section_commands(redis_server: RedisServer) -> None:
    print("\n## 3. Redis round trips per slot (4 replicas, 100 slots, step-driven)\n")
    t0 = 1_800_000_000.0
    counters = []
    runners = []
    for i in range(4):
        cls = type(f"Counting{i}", (CountingConnection,), {"sent": 0})
        pool = redis.ConnectionPool(
            connection_class=cls, host=redis_server.host, port=redis_server.port
        )
        client = redis.Redis(connection_pool=pool)
        runner = CronRunner(client, prefix="bench-rt", clock=FakeClock(t0))
        runner.add_job(lambda: None, IntervalSchedule(10), key="job")
        client.ping()  # connect outside the count
        cls.sent = 0
        counters.append(cls)
        runners.append(runner)
    wins = [0] * 4
    sent_win = 0
    sent_lose = 0
    for step in range(100):
        for i, runner in enumerate(runners):
            runner.clock.set(t0 + step * 10 + 0.001 * (i + 1))  # type: ignore[attr-defined]
            before = counters[i].sent
            ran = runner.run_pending()
            cost = counters[i].sent - before
            if ran:
                wins[i] += 1
                sent_win += cost
            else:
                sent_lose += cost
    total_wins = sum(wins)
    print(
        f"winner: {sent_win / total_wins:.2f} round trips per slot (claim + finish; "
        "no renewals: the handler returns at once)"
    )
    print(f"each loser: {sent_lose / (4 * 100 - total_wins):.2f} round trips per slot")
    print(f"wins per replica: {wins}")


# -- 4. takeover --------------------------------------------------------------------------


def _takeover_replica(url: str, name: str, out: Any, lease: float) -> None:
    client = redis.Redis.from_url(url, socket_timeout=2)
    runner = CronRunner(client, prefix="bench-takeover")

    def handler(ctx: JobContext) -> None:
        out.put((name, os.getpid(), ctx.slot_ms, ctx.attempt, time.time()))
        ctx.cancelled.wait(lease * 2)

    runner.add_job(handler, IntervalSchedule(lease * 4), key="long", ttl=lease, catch_up=0.5)
    runner.start()
    signal.sigwait({signal.SIGTERM})


def section_takeover(url: str, quick: bool) -> None:
    lease = 1.5
    rounds = 3 if quick else 6
    print(
        f"\n## 4. Takeover after kill -9 "
        f"(lease {lease} s, heartbeat {lease / 3} s, {rounds} kills)\n"
    )
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    procs: dict[str, Any] = {}
    counter = iter(range(1000))

    def spawn() -> None:
        name = f"r{next(counter)}"
        p = ctx.Process(target=_takeover_replica, args=(url, name, events, lease))
        p.start()
        procs[name] = p

    for _ in range(3):
        spawn()
    delays = []
    for _ in range(rounds):
        while True:  # the next first attempt
            name, pid, slot, attempt, _t = events.get(timeout=60)
            if attempt == 1:
                break
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        procs.pop(name).join()
        while True:
            _name2, _pid2, slot2, attempt2, t2 = events.get(timeout=30)
            if slot2 == slot and attempt2 == 2:
                delays.append(t2 - killed_at)
                break
        spawn()
    for p in procs.values():
        p.terminate()
        p.join()
    bound = lease + lease / 3
    print(f"delays (s): {', '.join(f'{d:.2f}' for d in delays)}")
    print(
        f"p50 {percentile(delays, 50):.2f} s, max {max(delays):.2f} s; "
        f"bound lease + heartbeat = {bound:.2f} s (target ≤ {bound + 0.5:.2f} s)"
    )


# -- 5. burst -----------------------------------------------------------------------------


class ClaimClock:
    """An observer noting when each claim was answered and each run finished."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.finished: list[float] = []
        self.lock = threading.Lock()

    def claimed(self, key: str, slot_ms: int, status: str, runner_id: str) -> None:
        with self.lock:
            self.times.append(time.time())

    def run_finished(self, record: Any) -> None:
        with self.lock:
            self.finished.append(time.time())


def section_burst(client: redis.Redis, quick: bool, workers: int = 8) -> None:
    for n in (1_000,) if quick else (1_000, 10_000):
        burst(client, n, workers)


def burst(client: redis.Redis, n: int, workers: int) -> None:
    print(f"\n## 5. {n:,} jobs due in the same second (one runner, {workers} workers)\n")
    client.flushdb()
    clock = ClaimClock()
    runner = CronRunner(client, prefix="bench-burst", observers=[clock], max_workers=workers)
    # Two bursts, one period apart: the first finds jobs that never ran on this runner,
    # the second jobs whose last run it has seen (what a claim batch is sized by).
    catch_up = 5 + n // 1000  # a claim waiting for a worker is dropped after this
    period = catch_up + 5
    schedule = IntervalSchedule(period)
    starts: list[float] = []
    for i in range(n):
        runner.add_job(
            lambda: starts.append(time.time()), schedule, key=f"burst-{i}", catch_up=catch_up
        )
    first = (int(time.time()) // period + 1) * period
    if first - time.time() < 2:
        first += period
    # start 2.5 s before the boundary: the slot before it is beyond catch-up by then
    time.sleep(max(0.0, first - 2.5 - time.time()))
    runner.start()
    deadline = time.time() + 60 + 2 * period
    while len(clock.finished) < 2 * n and time.time() < deadline:
        time.sleep(0.05)
    runner.stop(timeout=10)
    if len(clock.finished) < 2 * n:
        print(f"only {len(clock.finished)} of {2 * n} finished within the window")
        return
    # A claim is sent when a worker is free for it, so claims and runs interleave: the
    # figures are the handlers' start delays and when the last run had finished.
    for label, boundary in (("first burst", first), ("second burst", first + period)):
        delays = [(t - boundary) * 1000 for t in starts if boundary <= t < boundary + period]
        done = [t - boundary for t in clock.finished if boundary <= t < boundary + period]
        print(
            f"{label}: {len(delays):,} runs, start delay p50 {percentile(delays, 50):.0f} ms, "
            f"p99 {percentile(delays, 99):.0f} ms, max {max(delays):.0f} ms; "
            f"every run finished by {max(done):.3f} s"
        )


# -- 6. replication --------------------------------------------------------------------


def _slot_times(runner: CronRunner, t0: float, slots: int) -> list[float]:
    """Wall time (s) of each step-driven slot: claim (and WAIT), handler, finish."""
    times = []
    for step in range(slots):
        runner.clock.set(t0 + step * 10 + 0.001)  # type: ignore[attr-defined]
        started = time.perf_counter()
        ran = runner.run_pending()
        times.append(time.perf_counter() - started)
        assert ran == 1
    return times


def section_replication(quick: bool) -> None:
    slices, slots = (3, 200) if quick else (7, 500)
    print(f"\n## 6. wait_replicas=1: cost per slot ({slices} slices x {slots} slots each)\n")
    with RedisServer(extra_args=("--repl-diskless-sync-delay", "0")) as master:
        replica = RedisServer(extra_args=("--replicaof", master.host, str(master.port))).start()
        try:
            with replica.client(decode_responses=True) as c:
                while c.info("replication").get("master_link_status") != "up":
                    time.sleep(0.05)
            client = master.client(socket_timeout=10)
            t0 = 1_800_000_000.0
            medians: dict[int, list[float]] = {0: [], 1: []}
            for i in range(slices):
                for wait in (0, 1) if i % 2 == 0 else (1, 0):
                    runner = CronRunner(
                        client, prefix=f"bench-wait-{wait}-{i}", clock=FakeClock(t0),
                        wait_replicas=wait, wait_timeout=1,
                    )  # fmt: skip
                    runner.add_job(lambda: None, IntervalSchedule(10), key="job")
                    times = _slot_times(runner, t0, slots)
                    medians[wait].append(statistics.median(times) * 1e6)
                    assert runner.statistics().claims_unreplicated == 0
        finally:
            replica.stop()
    plain, waited = (statistics.median(medians[w]) for w in (0, 1))
    print(f"without WAIT: {plain:.0f} us per slot (median of slice medians)")
    extra = waited - plain
    print(f"wait_replicas=1: {waited:.0f} us per slot; {waited / plain:.2f}x, +{extra:.0f} us")
    print("round trips per slot are unchanged: the WAIT travels in the claim's pipeline")


# -- 7. fleet -------------------------------------------------------------------------------


def _fleet_replica(url: str, jobs: int, seconds: float, out: Any) -> None:
    client = redis.Redis.from_url(url, socket_timeout=5)
    runs: list[tuple[str, int]] = []
    lock = threading.Lock()

    def handler(ctx: JobContext) -> None:
        with lock:
            runs.append((ctx.key, ctx.slot_ms))
        ctx.cancelled.wait(0.5)

    runner = CronRunner(client, prefix="bench-fleet")  # max_workers 8, the default
    for i in range(jobs):
        runner.add_job(handler, IntervalSchedule(5), key=f"f{i}", catch_up=1)
    runner.start()
    time.sleep(seconds)
    runner.stop(timeout=2)
    out.put((os.getpid(), runs))


def section_fleet(url: str, quick: bool) -> None:
    replicas, jobs, seconds = (8, 80, 20) if quick else (20, 200, 40)
    print(f"\n## 7. {replicas} replicas x {jobs} jobs of 0.5 s every 5 s, {seconds} s\n")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    started = time.time()
    procs = [
        ctx.Process(target=_fleet_replica, args=(url, jobs, seconds, out)) for _ in range(replicas)
    ]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    ran = {(key, slot) for _, runs in results for key, slot in runs}
    # the slots every replica was up for: from the first boundary after the slowest
    # start-up (spawn imports take a few seconds) to the last one before the first stop
    first = (int(started) // 5 + 2) * 5 + 5
    last = (int(started + seconds) // 5 - 1) * 5
    slots = [t * 1000 for t in range(first, last + 1, 5)]
    expected = [(f"f{i}", s) for s in slots for i in range(jobs)]
    missed = sum(1 for e in expected if e not in ran)
    per = sorted(sum(1 for key, slot in runs if slot in slots) for _, runs in results)
    print(f"slots due: {len(expected)}; missed: {missed} ({missed / len(expected):.1%})")
    print(f"runs per replica: min {per[0]}, median {per[len(per) // 2]}, max {per[-1]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "sections",
        nargs="*",
        default=["idle", "precision", "commands", "takeover", "burst", "replication", "fleet"],
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    with RedisServer() as server:
        client = server.client(socket_timeout=10)
        info = client.info("server")
        print(
            f"# cronlock runner benchmarks\n\nserver {info.get('redis_version')} on {server.url}; "
            f"Python {sys.version.split()[0]}; redis-py {redis.__version__}; {os.cpu_count()} cores"
        )
        sections: dict[str, Callable[[], None]] = {
            "idle": lambda: section_idle(client, args.quick),
            "precision": lambda: section_precision(server.url, args.quick),
            "commands": lambda: section_commands(server),
            "takeover": lambda: section_takeover(server.url, args.quick),
            "burst": lambda: section_burst(client, args.quick),
            "replication": lambda: section_replication(args.quick),
            "fleet": lambda: section_fleet(server.url, args.quick),
        }
        for name in args.sections:
            sections[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
