"""A key that lives on a given Cluster node, for probes that must not be redirected.

``cronlock doctor`` writes one probe key on each server it checks. On a Cluster node a
random key hashes to any of the 16384 slots, so two times in three (with three masters)
the node answers ``MOVED`` and the probe reports a failure the cluster does not have.
A key whose hash tag falls in the node's own slots is served by that node.
"""

from __future__ import annotations

import secrets
from typing import Any

from redis.crc import key_slot
from redis.exceptions import RedisError

from cronlock._keys import tag

__all__ = ["own_slots", "probe_key"]

#: Tags tried at most; with N masters each try lands on a given node with chance 1/N.
MAX_TRIES = 10_000


def own_slots(client: Any) -> list[tuple[int, int]]:
    """The slot ranges the server behind ``client`` serves (``CLUSTER NODES``, ``myself``).

    Empty for a node that serves none; raises RedisError where the server is no Cluster
    node (or the user may not run ``CLUSTER NODES``).
    """
    raw = client.execute_command("CLUSTER", "NODES")
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8 or "myself" not in fields[2].split(","):
            continue
        ranges = []
        for item in fields[8:]:
            if item.startswith("["):  # a slot being migrated: not (yet) this node's alone
                continue
            first, _, last = item.partition("-")
            ranges.append((int(first), int(last or first)))
        return ranges
    return []


def probe_key(client: Any, prefix: str) -> str:
    """``PREFIX:doctor:{RANDOM}``, on a slot of this node when it is a Cluster node."""
    try:
        ranges = own_slots(client)
    except RedisError:
        ranges = []
    key = f"{prefix}:doctor:{tag(secrets.token_hex(8))}"
    for _ in range(MAX_TRIES if ranges else 0):
        slot = key_slot(key.encode())
        if any(first <= slot <= last for first, last in ranges):
            break
        key = f"{prefix}:doctor:{tag(secrets.token_hex(8))}"
    return key
