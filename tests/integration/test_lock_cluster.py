"""The lock on a 3-master Redis Cluster: every key of one lock shares a hash tag."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from redis.cluster import RedisCluster

from cronlock import LockLost, LockNotAcquired, RedisLock, _forksafe, inspect, redis_lock
from cronlock._keys import LockKeys
from cronlock.testing import wait_until
from tests import procs
from tests.cluster import cluster_client, cluster_nodes

__all__ = ["cluster_client", "cluster_nodes"]  # fixtures, used by name

pytestmark = pytest.mark.slow  # starting the cluster takes a few seconds

NAMES = ["alpha", "beta", "gamma", "delta", "invoice:42"]


def test_keys_of_one_lock_share_a_slot(cluster_client: RedisCluster) -> None:
    """All keys of a lock hash to one slot, and the names spread over several nodes."""
    slots = set()
    for name in NAMES:
        keys = LockKeys.of("cronlock", name)
        own = {cluster_client.keyslot(k) for k in (*keys[:4], keys.wake("t"))}
        assert len(own) == 1
        slots |= own
    nodes = {cluster_client.nodes_manager.get_node_from_slot(s).name for s in slots}
    assert len(nodes) > 1


def test_acquire_release_inspect(cluster_client: RedisCluster) -> None:
    """Acquire, inspect, refuse a second holder, release, with fences increasing, on every node."""
    for name in NAMES:
        with redis_lock(cluster_client, name, ttl=5, renew=True) as lock:
            info = inspect(cluster_client, name)
            assert info is not None
            assert info.fencing_token == lock.fencing_token
            with pytest.raises(LockNotAcquired):
                redis_lock(cluster_client, name, ttl=5).acquire()
        with redis_lock(cluster_client, name, ttl=5) as again:
            assert again.fencing_token > lock.fencing_token
        assert inspect(cluster_client, name) is None


def test_waiter_woken_on_cluster(cluster_client: RedisCluster) -> None:
    """A waiter blocked on its wake list (BLPOP routed by slot) gets the lock on release."""
    holder = RedisLock(cluster_client, "invoice:42", ttl=30).acquire()
    got: list[Any] = []
    thread = threading.Thread(
        target=lambda: got.append(RedisLock(cluster_client, "invoice:42", ttl=5, wait=20).acquire())
    )
    thread.start()
    keys = LockKeys.of("cronlock", "invoice:42")
    wait_until(lambda: cluster_client.zcard(keys.queue) == 1)
    holder.release()
    thread.join(20)
    assert len(got) == 1
    got[0].release()


def test_lost_lock_on_cluster(cluster_client: RedisCluster) -> None:
    """Renewal on a cluster notices a stolen key."""
    keys = LockKeys.of("cronlock", "alpha")
    with pytest.raises(LockLost), redis_lock(cluster_client, "alpha", ttl=0.3, renew=True) as lock:  # noqa: PT012 - the block's exit is under test
        cluster_client.set(keys.lock, "thief")
        assert lock.lost.wait(5)


def test_a_renewing_hold_on_a_cluster_has_every_node_pool_held_across_fork(
    cluster_client: RedisCluster,
) -> None:
    """Fork safety reaches a cluster client's per-node pools (the renewal thread may be
    inside any of them), and a child forked during such a hold can use the cluster."""
    with redis_lock(cluster_client, "alpha", ttl=5, renew=True):
        held_across_fork = _forksafe._locks()
        nodes = [n for n in cluster_client.get_nodes() if n.redis_connection is not None]
        assert len(held_across_fork) >= len(nodes) >= 3
        pid = os.fork()
        if pid == 0:  # the child: never return into pytest
            code = 1
            try:
                code = 0 if cluster_client.ping(target_nodes=RedisCluster.ALL_NODES) else 1
            finally:
                os._exit(code)
        code = procs.reap(pid)
    assert code == 0
