"""Soak: many replicas x many jobs for minutes, with random faults. Not run in CI.

Run it with (about 12 minutes; sizes and length from the environment)::

    SOAK_REPLICAS=20 SOAK_JOBS=200 SOAK_SECONDS=600 \\
        pytest tests/faults/test_soak.py -m soak -s -p no:cacheprovider --timeout 1200
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Callable

import pytest

from cronlock.testing import RedisServer
from tests.faults.checker import Fault, JobSpec, Report, check
from tests.history import History, Replicas, kill

# slow too, so that "-m 'not slow'" (which replaces the default "-m 'not soak'") leaves it out
pytestmark = [pytest.mark.soak, pytest.mark.faults]


def test_soak_random_faults(
    server: RedisServer, record_dir: Path, record_report: Callable[[Report], Report]
) -> None:
    """N replicas x M jobs for S seconds with random kill -9, SIGSTOP and Redis freezes:
    no overlap under valid leases, no slot finished twice, fences in order."""
    replicas_n = int(os.environ.get("SOAK_REPLICAS", "20"))
    jobs_n = int(os.environ.get("SOAK_JOBS", "200"))
    seconds = float(os.environ.get("SOAK_SECONDS", "600"))
    rng = random.Random(10)
    many = [f"j:5:0.5:2:{jobs_n}"]
    replicas = Replicas(
        server.url, record_dir, [], extra=("--socket-timeout", "0.5", "--many", many[0])
    )
    faults: list[Fault] = []
    try:
        replicas.start_many(replicas_n)
        t0 = time.time() + 1
        end = t0 + seconds
        while time.time() < end:
            time.sleep(rng.uniform(5, 15))
            alive = replicas.alive()
            kind = rng.choice(["kill", "stop", "redis"])
            if kind == "kill" and len(alive) > 2:
                victim = rng.choice(alive)
                kill(victim.pid)
                faults.append(Fault("kill", time.time(), pid=victim.pid))
                replicas.spawn()
            elif kind == "stop" and alive:
                victim = rng.choice(alive)
                at = time.time()
                kill(victim.pid, signal.SIGSTOP)
                time.sleep(rng.uniform(1, 4))
                kill(victim.pid, signal.SIGCONT)
                faults.append(Fault("stop", at, time.time(), pid=victim.pid))
            else:
                at = time.time()
                server.pause()
                time.sleep(rng.uniform(0.5, 3))
                server.resume()
                faults.append(Fault("outage", at, time.time()))
        t1 = time.time() - 5
    finally:
        replicas.stop_all()
    specs = [JobSpec(f"j{i}", 5, 0.5, 2) for i in range(jobs_n)]
    report = record_report(
        check(
            f"10 soak {replicas_n}x{jobs_n} {seconds:.0f}s",
            History.read(record_dir),
            specs,
            (t0, t1),
            tuple(faults),
        )
    )
    report.assert_guarantees(allow_missed=len(report.missed))  # misses measured, see table
