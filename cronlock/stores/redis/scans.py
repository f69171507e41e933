"""Bounded SCANs: the heartbeats of one prefix, and the prefixes that have runners."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Optional

from redis.cluster import RedisCluster

from cronlock._keys import ANY_RUNNER_PATTERN, split_runner_key
from cronlock._scripts import text

__all__ = ["heartbeats", "prefixes_with_runners"]

#: Heartbeat keys read at most (``SCAN``), so a stray pattern cannot read a whole database.
SCAN_LIMIT = 10_000
#: `prefixes_with_runners` examines at most this many keys (SCAN COUNT 1000 per call) ...
PREFIX_SCAN_KEYS = 50_000
#: ... and reads at most this many candidate heartbeats.
PREFIX_SCAN_CANDIDATES = 200


def heartbeats(client: Any, prefix: str) -> list[tuple[str, Optional[float]]]:
    """Every live heartbeat of ``prefix`` (found with SCAN): (JSON value, seconds left)."""
    keys = []
    for raw in client.scan_iter(match=f"{prefix}:runner:*", count=500):
        keys.append(text(raw))
        if len(keys) >= SCAN_LIMIT:
            break
    if not keys:
        return []
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
        pipe.pttl(key)
    replies = pipe.execute()
    return [
        (text(value), pttl / 1000 if isinstance(pttl, int) and pttl >= 0 else None)
        for value, pttl in zip(replies[::2], replies[1::2])
        if value is not None
    ]


def prefixes_with_runners(client: Any) -> dict[str, int]:
    """Prefixes with live runners in this database (any prefix), and how many each has.

    Bounded: one SCAN over at most `PREFIX_SCAN_KEYS` keys, reading at most
    `PREFIX_SCAN_CANDIDATES` heartbeats; on a larger keyspace the answer may be
    incomplete. A key counts only if it holds a heartbeat naming its own runner id,
    so another application's ``x:runner:y`` keys are not taken for runners.
    """
    candidates: list[tuple[str, str, str]] = []
    examined = 0
    for batch in _pages(client, ANY_RUNNER_PATTERN, 1000):
        if examined >= PREFIX_SCAN_KEYS or len(candidates) >= PREFIX_SCAN_CANDIDATES:
            break
        examined += 1000
        for raw in batch:
            try:
                key = text(raw)
            except UnicodeDecodeError:
                continue
            parts = split_runner_key(key)
            if parts is not None:
                candidates.append((key, *parts))
    candidates = candidates[:PREFIX_SCAN_CANDIDATES]
    if not candidates:
        return {}
    pipe = client.pipeline(transaction=False)
    for key, _, _ in candidates:
        pipe.get(key)
    found: dict[str, int] = {}
    for (_, prefix, runner_id), value in zip(candidates, pipe.execute(raise_on_error=False)):
        try:
            heartbeat = json.loads(text(value))
        except (TypeError, ValueError):  # an error reply, None (expired) or not JSON
            continue
        if isinstance(heartbeat, dict) and str(heartbeat.get("id")) == runner_id:
            found[prefix] = found.get(prefix, 0) + 1
    return dict(sorted(found.items()))


def _pages(client: Any, match: str, count: int) -> Iterator[list[Any]]:
    """SCAN replies, one page at a time: of the server, or of each Cluster primary in turn
    (``RedisCluster.scan`` answers a cursor per node)."""
    cluster: Any = client
    if isinstance(client, RedisCluster):
        for node in cluster.get_primaries():
            cursor: Any = 0
            while True:
                cursors, batch = cluster.scan(cursor, match=match, count=count, target_nodes=node)
                yield batch
                cursor = cursors[node.name]
                if int(cursor) == 0:
                    break
        return
    cursor = 0
    while True:
        cursor, batch = client.scan(cursor, match=match, count=count)
        yield batch
        if int(cursor) == 0:
            return
