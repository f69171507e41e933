"""Every CLI command that reads or writes shared state, on a 3-master Redis Cluster and
through Sentinel (private servers), through the real entry point (``python -m cronlock``).

On a Cluster the keys of one job share a hash tag, so jobs and locks land on every node:
a command that used a plain client would get ``MOVED`` for two keys in three. The jobs
here are chosen to land on all three masters.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from cronlock import CronRunner, FakeClock, redis_lock
from cronlock.doctor import check_server
from cronlock.stores import RedisStore, from_url
from cronlock.testing import RedisServer, wait_until
from tests.cluster import start_cluster
from tests.integration.test_cli import cronlock
from tests.sentinel import Sentinels

pytestmark = pytest.mark.slow

PREFIX = "topo"
T0 = 1_800_000_000.0


def keys_on_each_third(count: int = 3) -> list[str]:
    """``count`` job keys whose hash slots fall in different thirds of the 16384 slots
    (one per master of `tests.cluster.start_cluster`'s split)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < count:
        key = f"job-{i}"
        found.setdefault(key_slot(key.encode()) * count // 16384, key)
        i += 1
    return [found[third] for third in sorted(found)]


KEYS = keys_on_each_third()


class Topology:
    """A URL the CLI is given, and a client of the same servers for the test's own use."""

    def __init__(self, name: str, url: str, client: Any) -> None:
        self.name, self.url, self.client = name, url, client

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cronlock("--store-url", self.url, "--prefix", PREFIX, *args)

    def json(self, *args: str, codes: tuple[int, ...] = (0,)) -> Any:
        out = self.cli(*args, "--json")
        assert out.returncode in codes, (out.returncode, out.stdout, out.stderr)
        return json.loads(out.stdout)


@pytest.fixture(scope="module")
def cluster_topology() -> Iterator[Topology]:
    servers = start_cluster()
    client = RedisCluster(host=servers[0].host, port=servers[0].port, socket_timeout=5)
    try:
        yield Topology("cluster", f"redis://{servers[0].host}:{servers[0].port}/0", client)
    finally:
        client.close()
        for server in servers:
            server.stop()


@pytest.fixture(scope="module")
def sentinel_topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    master = RedisServer().start()
    sentinels = None
    try:
        sentinels = Sentinels(master, 1, tmp_path_factory.mktemp("sentinel"), quorum=1)
        wait_until(lambda: sentinels.master_port() == master.port, 15)
        url = f"redis+sentinel://{sentinels.spec}/mymaster/0"
        store = from_url(url, socket_timeout=5)
        assert isinstance(store, RedisStore)
        yield Topology("sentinel", url, store.client)
        store.client.close()
    finally:
        if sentinels is not None:
            sentinels.stop()
        master.stop()


@pytest.fixture(params=["cluster", "sentinel"])
def topology(request: pytest.FixtureRequest) -> Topology:
    """Each topology with its data flushed and one job slot run per key of `KEYS`."""
    topo: Topology = request.getfixturevalue(f"{request.param}_topology")
    if isinstance(topo.client, RedisCluster):
        topo.client.flushall(target_nodes=RedisCluster.PRIMARIES)
    else:
        topo.client.flushall()
    runner = CronRunner(topo.client, prefix=PREFIX, clock=FakeClock(T0))
    for key in KEYS:
        runner.interval(seconds=10, key=key)(lambda: None)
    runner.task("report")(lambda: None)
    runner.sync()
    runner.run_pending()
    return topo


def test_the_cluster_helper_spreads_keys_over_three_masters(
    cluster_topology: Topology,
) -> None:
    """The premise of this module: `KEYS` live on three different nodes."""
    cluster = cluster_topology.client
    nodes = {cluster.get_node_from_key(f"{{{key}}}").name for key in KEYS}
    assert len(nodes) == 3


def test_doctor_passes_on_every_node(topology: Topology) -> None:
    """doctor exits 0; on a Cluster it checks each of the 3 primaries, keys and scripting
    included (a random probe key would be MOVED on two nodes in three)."""
    out = topology.cli("doctor", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    checks = json.loads(out.stdout)["checks"]
    assert all(c["status"] != "fail" for c in checks), checks
    if topology.name == "cluster":
        nodes = {c["node"] for c in checks}
        assert len(nodes) == 3
        for node in nodes:
            names = {c["name"] for c in checks if c["node"] == node and c["status"] == "pass"}
            assert {"reachable", "cluster", "scripting", "keys"} <= names
        table = topology.cli("doctor")
        assert table.stdout.splitlines()[0].split() == ["STATUS", "NODE", "CHECK", "DETAIL"]
    else:
        assert {c["name"] for c in checks} >= {"reachable", "scripting", "keys"}
        assert all(c["node"] is None for c in checks)


def test_jobs_history_and_status_read_every_node(topology: Topology) -> None:
    """jobs, history and status see the jobs on every node, with their run."""
    jobs = {j["key"]: j for j in topology.json("jobs")}
    assert sorted(jobs) == sorted(KEYS)
    assert {j["status"] for j in jobs.values()} == {"done"}
    for key in KEYS:
        events = [e["event"] for e in topology.json("history", key)]
        assert events == ["succeeded", "running"]
    merged = topology.json("history", "--limit", "100")
    assert sorted({e["key"] for e in merged}) == sorted(KEYS)
    status = topology.json("status", codes=(1,))  # no live runner: exit 1, as anywhere
    assert (status["jobs"], status["runners"], status["failing"]) == (3, 0, 0)


def test_runners_and_status_see_a_live_runner(topology: Topology) -> None:
    """A started runner's heartbeat is listed by runners; status then exits 0."""
    runner = CronRunner(topology.client, prefix=PREFIX)
    runner.cron("0 3 * * *", key="nightly")(lambda: None)
    runner.start()
    try:
        wait_until(lambda: topology.json("runners"), 15)
        [info] = topology.json("runners")
        assert info["jobs"] == ["nightly"]
        assert topology.json("status")["runners"] == 1
    finally:
        runner.stop(timeout=10)


def test_pause_resume_and_trigger_reach_every_node(topology: Topology) -> None:
    """pause/resume one job and --all, and trigger, on jobs spread over the nodes."""
    for key in KEYS:
        assert topology.cli("pause", key).returncode == 0
    assert all(j["paused"] for j in topology.json("jobs"))
    for key in KEYS:
        assert topology.cli("resume", key).returncode == 0
    assert not any(j["paused"] for j in topology.json("jobs"))
    assert topology.json("pause", "--all") == {"paused": 3, "all": True}
    assert all(j["paused"] for j in topology.json("jobs"))
    assert topology.json("resume", "--all") == {"resumed": 3, "all": True}
    for key in KEYS:
        assert topology.json("trigger", key)["key"] == key
    assert {j["pending_triggers"] for j in topology.json("jobs")} == {1}


def test_schedules_add_list_remove(topology: Topology) -> None:
    """schedule add / list / remove work (the schedules live under one hash tag)."""
    added = topology.json("schedule", "add", "report", "--interval", "60", "--id", "s1")
    assert added["id"] == "s1"
    assert [s["id"] for s in topology.json("schedule", "list")] == ["s1"]
    assert topology.json("schedule", "remove", "s1") == {"removed": True, "id": "s1"}
    assert topology.json("schedule", "list") == []


def test_another_prefix_gets_the_hint_found_on_every_node(topology: Topology) -> None:
    """Under a prefix with no runner, the hint names ours: the SCAN covers every node."""
    runner = CronRunner(topology.client, prefix=PREFIX)
    runner.cron("0 3 * * *", key="nightly")(lambda: None)
    runner.start()
    try:
        wait_until(lambda: topology.json("runners"), 15)
        out = cronlock("--store-url", topology.url, "--prefix", "elsewhere", "runners")
        assert out.returncode == 0, out.stderr
        assert f"runners found under '{PREFIX}'" in out.stderr
    finally:
        runner.stop(timeout=10)


def test_locks_and_exec_on_keys_of_every_node(topology: Topology, tmp_path: Path) -> None:
    """locks lists a held lock on each node; exec runs under locks on each node, and a
    lock held elsewhere makes it exit 75 without running the command."""
    marker = tmp_path / "ran"
    write = [sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')"]
    for key in KEYS:
        out = topology.cli("exec", "--key", key, "--ttl", "10", "--", *write)
        assert out.returncode == 0, out.stderr
    assert marker.read_text() == "x" * len(KEYS)
    held = [redis_lock(topology.client, key, 30, prefix=PREFIX) for key in KEYS]
    for lock in held:
        lock.acquire()
    try:
        assert sorted(i["key"] for i in topology.json("locks")) == sorted(KEYS)
        for key in KEYS:
            assert topology.json("locks", key)[0]["holder"]
            out = topology.cli("exec", "--key", key, "--ttl", "10", "--", *write)
            assert out.returncode == 75, out.stderr
    finally:
        for lock in held:
            lock.release()
    assert marker.read_text() == "x" * len(KEYS)
    slot = topology.cli(
        "exec", "--key", KEYS[1], "--ttl", "10", "--slot", "* * * * *", "--slot-grace", "61",
        "--", *write,
    )  # fmt: skip
    assert slot.returncode == 0, slot.stderr
    again = topology.cli(
        "exec", "--key", KEYS[1], "--ttl", "10", "--slot", "* * * * *", "--slot-grace", "61",
        "--", *write,
    )  # fmt: skip
    assert again.returncode == 75, again.stderr  # that occurrence was claimed already
    assert marker.read_text() == "x" * (len(KEYS) + 1)


def test_an_explicit_cluster_flag_and_its_opposite(cluster_topology: Topology) -> None:
    """?cluster=true opens the Cluster without detection; ?cluster=false keeps a plain
    client, which then fails on other nodes' keys as redis-py does (no silent switch)."""
    url = cluster_topology.url
    on = cronlock("--store-url", url + "?cluster=true", "--prefix", PREFIX, "doctor", "--json")
    assert on.returncode == 0, on.stderr
    assert len({c["node"] for c in json.loads(on.stdout)["checks"]}) == 3
    off = cronlock("--store-url", url + "?cluster=false", "--prefix", PREFIX, "doctor", "--json")
    assert {c["node"] for c in json.loads(off.stdout)["checks"]} == {None}


def test_an_unreachable_cluster_seed_is_exit_69(refused_port: int) -> None:
    """?cluster=true on a port nothing listens on: exit 69, the store was not reached."""
    out = cronlock("--store-url", f"redis://127.0.0.1:{refused_port}?cluster=true", "jobs")
    assert out.returncode == 69
    assert "Redis Cluster unavailable" in out.stderr


def test_redis_url_option_works_for_a_sentinel_url(sentinel_topology: Topology) -> None:
    """The older --redis-url name takes the Sentinel form too."""
    out = cronlock("--redis-url", sentinel_topology.url, "--prefix", PREFIX, "jobs", "--json")
    assert out.returncode == 0, out.stderr
    assert isinstance(json.loads(out.stdout), list)


def test_check_server_on_each_node_writes_its_probe_on_that_node(
    cluster_topology: Topology,
) -> None:
    """check_server given one node's plain client picks a probe key that node serves:
    scripting and keys pass on every node, every time (a random key would be MOVED)."""
    cluster = cluster_topology.client
    for node in cluster.get_primaries():
        with redis.Redis(host=node.host, port=node.port, socket_timeout=5) as plain:
            for _ in range(3):
                checks = {c.name: c for c in check_server(plain, prefix=PREFIX)}
                assert checks["scripting"].status == "pass", checks["scripting"]
                assert checks["keys"].status == "pass", checks["keys"]
                assert checks["cluster"].status == "pass"
