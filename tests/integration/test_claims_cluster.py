"""A tick's claims on a 3-master cluster: one write per node, redirects sent again alone."""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster

from cronlock.stores.redis.claims import ClaimRequest, claim_many
from cronlock.stores.types import ClaimStatus
from tests.cluster import cluster_client, cluster_nodes
from tests.writes import count_writes

__all__ = ["cluster_client", "cluster_nodes"]  # fixtures, used by name

pytestmark = pytest.mark.slow  # starting the cluster takes a few seconds

WON = ClaimStatus.WON


def requests(count: int, owner: str = "me", job: str = "j") -> list[ClaimRequest]:
    return [
        ClaimRequest(f"cl:job:{{{job}{i}}}", 1_000, f"{owner}-{i}", 5_000, 1, "skip", "h:1:r")
        for i in range(count)
    ]


def node_of(client: RedisCluster, key: str) -> str:
    return str(client.get_node_from_key(key).name)


def test_claims_go_one_write_per_node(cluster_client: RedisCluster) -> None:
    batch = requests(60)
    nodes = {node_of(cluster_client, r.state_key) for r in batch}
    assert len(nodes) == 3
    claim_many(cluster_client, requests(30, job="warm-up"))  # loads the script
    writes = {
        node.name: count_writes(node.redis_connection) for node in cluster_client.get_primaries()
    }
    replies = claim_many(cluster_client, batch)
    assert [r.status for r in replies] == [WON] * 60
    assert {name: sum(w) for name, w in writes.items()} == dict.fromkeys(nodes, 1)
    rivals = claim_many(cluster_client, requests(60, owner="rival"))
    assert {r.status for r in rivals} == {ClaimStatus.TAKEN}


def test_a_claim_sent_to_the_wrong_node_is_redirected(cluster_client: RedisCluster) -> None:
    batch = requests(12)
    key = batch[0].state_key
    right = cluster_client.get_node_from_key(key)
    wrong = next(n for n in cluster_client.get_primaries() if n.name != right.name)
    slot = cluster_client.keyslot(key)
    cluster_client.nodes_manager.slots_cache[slot] = [wrong]  # a stale slot map
    replies = claim_many(cluster_client, batch)
    assert [r.status for r in replies] == [WON] * 12
    assert right.redis_connection.exists(key) == 1


def test_a_node_that_forgot_the_script_still_answers(cluster_client: RedisCluster) -> None:
    for node in cluster_client.get_primaries():
        node.redis_connection.script_flush()
    replies = claim_many(cluster_client, requests(30))
    assert [r.status for r in replies] == [WON] * 30
