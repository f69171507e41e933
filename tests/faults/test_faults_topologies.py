"""Failover scenarios: Redis Sentinel (1 master, 1 replica, 3 sentinels) and Redis
Cluster (3 masters + 3 replicas), all on loopback from the same server binary.

Replication is asynchronous: a claim acknowledged by a master that dies before its
replica got it is lost with the master. These tests measure what a failover costs
(duplicates, misses) and put it in the table; they assert only what holds regardless:
replicas survive, work resumes on the new master, nothing runs while no master answers.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest
import redis

from cronlock._server import RedisServer, free_port
from tests.faults.checker import Fault, JobSpec, Report, check
from tests.history import History, Replicas

pytestmark = [pytest.mark.slow, pytest.mark.faults]

Record = Callable[[Report], Report]
FAST = ("--socket-timeout", "0.5")


class Sentinels:
    """``n`` sentinel processes watching ``master`` as ``mymaster``."""

    def __init__(self, master: RedisServer, n: int, directory: Path) -> None:
        self.ports = [free_port() for _ in range(n)]
        self.procs: list[subprocess.Popen[bytes]] = []
        for port in self.ports:
            conf = directory / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {directory}\n"
                f"sentinel monitor mymaster {master.host} {master.port} 2\n"
                "sentinel down-after-milliseconds mymaster 1000\n"
                "sentinel failover-timeout mymaster 10000\n"
            )
            self.procs.append(
                subprocess.Popen(
                    [master.binary, str(conf), "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

    @property
    def spec(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def master_port(self) -> int:
        for port in self.ports:
            try:
                with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as s:
                    addr = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
                    if addr:
                        return int(addr[1])
            except redis.ConnectionError:
                continue
        return 0

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait(10)


@pytest.fixture
def sentinel_setup(
    server_factory: Callable[..., RedisServer], tmp_path: Path
) -> Iterator[tuple[RedisServer, RedisServer, Sentinels]]:
    master = server_factory()
    replica = server_factory(extra_args=("--replicaof", master.host, str(master.port)))
    deadline = time.monotonic() + 15
    with replica.client(decode_responses=True) as c:
        while c.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "replica did not sync"
            time.sleep(0.05)
    sentinels = Sentinels(master, 3, tmp_path)
    try:
        _wait_for_sentinels(sentinels)
        yield master, replica, sentinels
    finally:
        sentinels.stop()


def _wait_for_sentinels(sentinels: Sentinels) -> None:
    deadline = time.monotonic() + 15
    while True:  # every sentinel knows the replica and the other sentinels
        ok = 0
        for port in sentinels.ports:
            try:
                with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as s:
                    info = s.execute_command("SENTINEL", "MASTER", "mymaster")
                    fields = info if isinstance(info, dict) else dict(zip(info[::2], info[1::2]))
                    ok += (
                        str(fields["num-slaves"]) == "1"
                        and str(fields["num-other-sentinels"]) == "2"
                    )
            except (redis.ConnectionError, redis.ResponseError):
                pass
        if ok == 3:
            break
        assert time.monotonic() < deadline, "sentinels did not discover each other"
        time.sleep(0.1)


def test_sentinel_failover(
    sentinel_setup: tuple[RedisServer, RedisServer, Sentinels],
    record_dir: Path,
    record_report: Record,
) -> None:
    """The master is SIGKILLed under 3 replicas x 2 jobs; sentinels promote the replica.
    Replicas survive and resume on the new master; duplicates and misses around the
    failover are measured (asynchronous replication can lose a claim), not hidden."""
    master, replica, sentinels = sentinel_setup
    jobs = ["a:1:0.1:2", "b:2:0.5:2"]
    extra = (*FAST, "--sentinel", sentinels.spec, "--service", "mymaster")
    replicas = Replicas("redis://unused", record_dir, jobs, extra=extra)
    try:
        replicas.start_many(3)
        t0 = time.time() + 1
        time.sleep(5)
        master.kill()
        down = time.time()
        deadline = time.monotonic() + 30
        while sentinels.master_port() != replica.port:
            assert time.monotonic() < deadline, "no failover"
            time.sleep(0.05)
        promoted = time.time()
        time.sleep(8)
        assert len(replicas.alive()) == 3
        t1 = time.time() - 2
    finally:
        replicas.stop_all()
    history = History.read(record_dir)
    faults = (Fault("outage", down, promoted),)
    report = record_report(
        check("8 Sentinel failover", history, [JobSpec.parse(j) for j in jobs], (t0, t1), faults)
    )
    report.notes.append(
        f"failover took {promoted - down:.1f} s; {len(report.dup_completions)} slots finished "
        f"twice, {len(report.missed)} unexplained misses"
    )
    after = [r for r in history.events("start") if r["t"] > promoted]
    assert after, "work resumed on the promoted replica"
    during = [r for r in history.events("start") if down + 0.6 < r["t"] < promoted - 0.1]
    assert during == [], "fail closed: nothing started while no master answered"
    assert not report.overlaps
