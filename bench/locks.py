"""Lock acquire+release throughput: cronlock against the raw floor and other libraries.

Run:  python bench/locks.py  [--slice 0.3] [--slices 15] [--only NAME ...] [--json PATH]

One private server (cronlock.testing.RedisServer); implementations run in interleaved
slices (each round runs every implementation once, in a shuffled order) and the median
per-slice rate is reported, so drift of the machine (other work on the box) hits every
implementation alike. Figures:

* uncontended cycles/s (one thread, a fresh key per slice); the ratio of its median to
  the floor's median, and the median over rounds of the ratio to the floor's slice of
  the same round (paired: what drift between rounds cannot move);
* CPU microseconds per cycle, this process (all its threads) plus the server process
  (``INFO cpu``): the work a cycle costs, which waiting for a busy machine's scheduler
  does not inflate the way it inflates wall-clock rates;
* round trips per cycle, counted on the client's sockets, and server commands per cycle
  from INFO commandstats deltas (commands run inside scripts count there too);
* with 8 threads contending for one key: cycles/s and min / mean acquisitions per thread.

The floor is the least any correct lock can do: ``SET NX PX`` then an ``EVALSHA``
compare-and-delete, through redis-py. The "Lua floor" row is the least a lock whose
acquire is one Lua script can do (an ``EVALSHA`` doing only ``SET NX PX``, then the same
compare-and-delete): the gap between the two rows is the cost of running acquire as a
script at all, which no script content can win back. python-redis-lock and pottery are optional
(``pip install python-redis-lock pottery``); they are not cronlock dependencies.
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import socket
import statistics
import threading
import time
from typing import Any, Callable, Optional

import redis

from cronlock import RedisLock
from cronlock.testing import RedisServer

TTL = 10
SENDS = [0]


class CountingConnection(redis.Connection):
    """Counts socket writes: one per round trip (a pipeline is one)."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        SENDS[0] += 1
        super().send_packed_command(command, check_health)


Cycle = Callable[[str], None]
# name -> (uncontended cycle factory, contended cycle factory)
Impl = tuple[Callable[[redis.Redis], Cycle], Callable[[redis.Redis], Cycle]]

COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
SET_NX_PX = """
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0
"""


def floor(client: redis.Redis, poll: Optional[float] = None) -> Cycle:
    release = client.register_script(COMPARE_AND_DELETE)

    def cycle(key: str) -> None:
        token = secrets.token_hex(16)
        while not client.set(key, token, nx=True, px=TTL * 1000):
            if poll is None:
                raise RuntimeError("floor: not acquired")
            time.sleep(poll)
        release(keys=[key], args=[token])

    return cycle


def lua_floor(client: redis.Redis, poll: Optional[float] = None) -> Cycle:
    acquire = client.register_script(SET_NX_PX)
    release = client.register_script(COMPARE_AND_DELETE)

    def cycle(key: str) -> None:
        token = secrets.token_hex(16)
        while not acquire(keys=[key], args=[token, TTL * 1000]):
            if poll is None:
                raise RuntimeError("Lua floor: not acquired")
            time.sleep(poll)
        release(keys=[key], args=[token])

    return cycle


def raw_socket(client: redis.Redis, poll: Optional[float] = None) -> Cycle:
    """The floor's two commands as bytes on a plain socket: what no client library beats."""
    kwargs = client.connection_pool.connection_kwargs
    local = threading.local()  # one socket per thread, for the contended runs
    sha = client.script_load(COMPARE_AND_DELETE)
    sha = sha.decode() if isinstance(sha, bytes) else sha
    ttl = str(TTL * 1000).encode()

    def command(*parts: bytes) -> bytes:
        return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)

    def ask(packed: bytes) -> bytes:
        sock = getattr(local, "sock", None)
        if sock is None:
            sock = local.sock = socket.create_connection((kwargs["host"], kwargs["port"]))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        SENDS[0] += 1
        sock.sendall(packed)
        reply = sock.recv(256)
        while not reply.endswith(b"\r\n"):
            reply += sock.recv(256)
        return reply

    def cycle(key: str) -> None:
        token = secrets.token_hex(16).encode()
        k = key.encode()
        while ask(command(b"SET", k, token, b"NX", b"PX", ttl)) != b"+OK\r\n":
            if poll is None:
                raise RuntimeError("raw socket: not acquired")
            time.sleep(poll)
        if ask(command(b"EVALSHA", sha.encode(), b"1", k, token)) != b":1\r\n":
            raise RuntimeError("raw socket: release failed")

    return cycle


def cronlock_cycle(renew: bool, wait: Optional[float]) -> Callable[[redis.Redis], Cycle]:
    def make(client: redis.Redis) -> Cycle:
        def cycle(key: str) -> None:
            lock = RedisLock(client, key, ttl=TTL, renew=renew, wait=wait).acquire()
            lock.release()

        return cycle

    return make


def redis_py(blocking: bool) -> Callable[[redis.Redis], Cycle]:
    def make(client: redis.Redis) -> Cycle:
        def cycle(key: str) -> None:
            lock = client.lock(key, timeout=TTL)
            if not lock.acquire(blocking=blocking):
                raise RuntimeError("redis-py: not acquired")
            lock.release()

        return cycle

    return make


def implementations() -> dict[str, Impl]:
    impls: dict[str, Impl] = {
        "floor (SET NX + EVALSHA)": (floor, lambda c: floor(c, poll=0.001)),
        "raw socket (SET NX + EVALSHA)": (raw_socket, lambda c: raw_socket(c, poll=0.001)),
        "Lua floor (2 x EVALSHA)": (lua_floor, lambda c: lua_floor(c, poll=0.001)),
        "cronlock renew=False": (cronlock_cycle(False, None), cronlock_cycle(False, 30)),
        "cronlock renew=True": (cronlock_cycle(True, None), cronlock_cycle(True, 30)),
        "redis-py Lock": (redis_py(False), redis_py(True)),
    }
    try:
        import redis_lock as prl
    except ImportError:
        print("python-redis-lock not installed: skipped (pip install python-redis-lock)")
    else:
        for renewal in (False, True):

            def make(client: redis.Redis, renewal: bool = renewal, blocking: bool = False) -> Cycle:
                def cycle(key: str) -> None:
                    lock = prl.Lock(client, key, expire=TTL, auto_renewal=renewal)
                    if not lock.acquire(blocking=blocking):
                        raise RuntimeError("python-redis-lock: not acquired")
                    lock.release()

                return cycle

            name = "python-redis-lock" + (" auto_renewal" if renewal else "")
            impls[name] = (make, lambda c, m=make: m(c, blocking=True))
    try:
        import pottery
    except ImportError:
        print("pottery not installed: skipped (pip install pottery)")
    else:

        def make_pottery(client: redis.Redis, blocking: bool = False) -> Cycle:
            def cycle(key: str) -> None:
                lock = pottery.Redlock(key=key, masters={client}, auto_release_time=TTL)
                if not lock.acquire(blocking=blocking):
                    raise RuntimeError("pottery: not acquired")
                lock.release()

            return cycle

        impls["pottery Redlock"] = (make_pottery, lambda c: make_pottery(c, blocking=True))
    return impls


def server_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_uncontended(cycle: Cycle, seconds: float, client: redis.Redis) -> tuple[float, float]:
    """Cycles per second, and CPU microseconds per cycle (this process + the server)."""
    key = "bench:" + secrets.token_hex(4)
    count = 0
    server_before = server_cpu(client)
    cpu = time.process_time()
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(20):
            cycle(key)
        count += 20
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu + server_cpu(client) - server_before
    return count / elapsed, cpu / count * 1e6


def run_contended(cycle: Cycle, seconds: float, threads: int = 8) -> tuple[float, list[int]]:
    key = "bench:" + secrets.token_hex(4)
    counts = [0] * threads
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            while not stop.is_set():
                cycle(key)
                counts[i] += 1
        except BaseException as error:
            errors.append(error)

    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join(60)
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return sum(counts) / elapsed, counts


def commandstats(client: redis.Redis) -> dict[str, int]:
    return {k[len("cmdstat_") :]: int(v["calls"]) for k, v in client.info("commandstats").items()}


def write_json(
    path: str,
    *,
    args: argparse.Namespace,
    version: str,
    floor_name: str,
    rates: dict[str, list[float]],
    cpus: dict[str, list[float]],
    paired: dict[str, float],
    trips: dict[str, tuple[float, float]],
    contended: dict[str, list[tuple[float, list[int]]]],
) -> None:
    """Write the raw figures of one run: per-slice rates and CPU, per-round contention."""
    result = {
        "redis_version": version,
        "redis_py": redis.__version__,
        "slice_seconds": args.slice,
        "slices": args.slices,
        "contended_slices": args.contended_slices,
        "floor": floor_name,
        "implementations": {
            name: {
                "rates": rates[name],
                "cpu_us": cpus[name],
                "paired": paired[name],
                "round_trips": trips[name][0],
                "server_commands": trips[name][1],
                "contended_rates": [rate for rate, _ in contended[name]],
                "contended_counts": [counts for _, counts in contended[name]],
            }
            for name in rates
        },
    }
    with open(path, "w", encoding="utf-8") as out:
        json.dump(result, out, indent=1)
        out.write("\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slice", type=float, default=0.3, help="seconds per slice")
    parser.add_argument("--slices", type=int, default=15, help="uncontended slices per impl")
    parser.add_argument("--contended-slices", type=int, default=3)
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only implementations whose name starts with NAME (repeatable; the floor "
        "always runs, as the reference)",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write every per-slice figure to PATH as JSON (bench/plot.py reads it); "
        "the printed table is unchanged",
    )
    args = parser.parse_args()

    server = RedisServer().start()
    try:
        pool = redis.ConnectionPool(
            host=server.host,
            port=server.port,
            socket_timeout=10,
            connection_class=CountingConnection,
        )
        client = redis.Redis(connection_pool=pool)
        info = client.info("server")
        version = info["redis_version"]
        print(f"server: redis {version} on port {server.port}; redis-py {redis.__version__}")
        impls = implementations()
        if args.only:
            first = next(iter(impls))
            impls = {
                name: impl
                for name, impl in impls.items()
                if name == first or any(name.startswith(prefix) for prefix in args.only)
            }
        cycles = {name: make(client) for name, (make, _) in impls.items()}
        blocking = {name: make(client) for name, (_, make) in impls.items()}

        # Round trips and server commands per cycle (after a warm-up that loads scripts).
        trips: dict[str, tuple[float, float]] = {}
        for name, cycle in cycles.items():
            run_uncontended(cycle, 0.1, client)
            time.sleep(0.05)  # let stray renewal threads (python-redis-lock) settle
            before, sends = commandstats(client), SENDS[0]
            n = 300
            for _ in range(n):
                cycle("bench:count")
            after = commandstats(client)
            calls = sum(after.values()) - sum(before.values()) - 1  # minus the INFO
            trips[name] = ((SENDS[0] - sends - 1) / n, calls / n)

        order = random.Random(0)
        floor_name = next(iter(impls))
        rates: dict[str, list[float]] = {name: [] for name in impls}
        cpus: dict[str, list[float]] = {name: [] for name in impls}
        for _ in range(args.slices):
            for name in order.sample(list(cycles), len(cycles)):
                rate, cpu = run_uncontended(cycles[name], args.slice, client)
                rates[name].append(rate)
                cpus[name].append(cpu)
        paired = {
            name: statistics.median(r / f for r, f in zip(rates[name], rates[floor_name]))
            for name in impls
        }

        contended: dict[str, list[tuple[float, list[int]]]] = {name: [] for name in impls}
        for _ in range(args.contended_slices):
            for name in order.sample(list(blocking), len(blocking)):
                contended[name].append(run_contended(blocking[name], args.slice * 2))

        floor_rate = statistics.median(rates[floor_name])
        floor_cpu = statistics.median(cpus[floor_name])
        floor_cont = statistics.median(r for r, _ in contended[floor_name])
        print()
        header = (
            f"{'implementation':30} {'cycles/s':>9} {'x floor':>8} {'paired':>7} "
            f"{'CPU us':>7} {'x floor':>8} {'RTT/cyc':>8} {'cmds/cyc':>9} | "
            f"{'8 threads/s':>11} {'x floor':>8} {'min/mean':>9}"
        )
        print(header)
        print("-" * len(header))
        for name in impls:
            rate = statistics.median(rates[name])
            cpu = statistics.median(cpus[name])
            cont = statistics.median(r for r, _ in contended[name])
            fairness = statistics.median(
                min(c) / statistics.mean(c) if sum(c) else 0.0 for _, c in contended[name]
            )
            rt, cmds = trips[name]
            print(
                f"{name:30} {rate:9,.0f} {rate / floor_rate:8.2f} {paired[name]:7.2f} "
                f"{cpu:7.1f} {floor_cpu / cpu:8.2f} {rt:8.2f} {cmds:9.2f} | "
                f"{cont:11,.0f} {cont / floor_cont:8.2f} {fairness:9.2f}"
            )
        if args.json:
            write_json(
                args.json,
                args=args,
                version=version,
                floor_name=floor_name,
                rates=rates,
                cpus=cpus,
                paired=paired,
                trips=trips,
                contended=contended,
            )
        print()
        print(
            "x floor: median rate / the floor's median rate; paired: median over rounds of "
            "rate / the floor's rate in the same round.\n"
            "CPU us: median CPU microseconds per cycle, this process (all threads) + the "
            "server; its x floor is the floor's CPU / this CPU.\n"
            "RTT/cyc: socket writes per acquire+release (client side); cmds/cyc: INFO "
            "commandstats calls per cycle, including commands run inside scripts.\n"
            "8 threads: one key, blocking acquires (floors poll every 1 ms; cronlock waits "
            "in its FIFO queue); min/mean: fewest acquisitions of one thread / the mean "
            "(median over slices)."
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
