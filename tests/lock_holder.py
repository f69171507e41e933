"""A process that takes a lock on a store named by URL, for the tests of locks across
processes (``tests/integration/test_store_locks_processes.py``).

``python -m tests.lock_holder URL PREFIX KEY contend ROUNDS COUNTER_FILE``: ROUNDS
read-modify-writes of a counter file under the lock, each hold printed as ``start end
fence`` (monotonic seconds, system-wide on Linux).

``python -m tests.lock_holder URL PREFIX KEY hold TTL``: acquire (renewed), print ``held
FENCE``, then wait until the lock is lost; print ``lost`` when it is, and ``LockLost``
when the ``with`` block ends in it (exit 3).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from cronlock import LockLost
from cronlock.stores import from_url, store_lock


def contend(store: object, key: str, rounds: int, counter: Path) -> None:
    for _ in range(rounds):
        with store_lock(store, key, ttl=10, wait=60) as lock:
            start = time.monotonic()
            value = int(counter.read_text() or 0)
            time.sleep(0.002)  # widen the window a missing lock would expose
            counter.write_text(str(value + 1))
            print(f"{start!r} {time.monotonic()!r} {lock.fencing_token}", flush=True)


def hold(store: object, key: str, ttl: float) -> int:
    try:
        with store_lock(store, key, ttl=ttl, renew=True) as lock:
            print(f"held {lock.fencing_token}", flush=True)
            lock.lost.wait(120)
            print("lost", flush=True)
    except LockLost:
        print("LockLost", flush=True)
        return 3
    return 0


def main(argv: list[str]) -> int:
    url, prefix, key, mode, *rest = argv
    store = from_url(url, prefix=prefix)
    if mode == "contend":
        contend(store, key, int(rest[0]), Path(rest[1]))
        return 0
    return hold(store, key, float(rest[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
