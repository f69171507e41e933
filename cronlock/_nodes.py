"""Script calls on a Redis Cluster: one write per node, every node's replies read after.

redis-py refuses ``EVALSHA`` in cluster pipelines, so without this a tick's claims on a
cluster go one round trip each. Here the calls are grouped by the node that owns their
first key (the cluster client's own slot map), each group is written on a connection of
that node's pool, and the replies are read once every node has been written to: a tick
costs one round trip per node touched, the nodes answering in parallel. Where this
path cannot vouch for a reply (a redirect, a node that failed, a client without the
lean path) the call's place holds None, and the caller sends it the ordinary way, whose
redirects and topology refresh are redis-py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)

from cronlock import _wire
from cronlock._scripts import Arg, Script

Call = tuple[Sequence[str], Sequence[Arg]]

# Replies that say "not here, or not now": the ordinary path redirects or waits.
_REROUTE = (MovedError, AskError, TryAgainError, ClusterDownError)


def call_per_node(client: Any, script: Script, calls: Sequence[Call]) -> list[Any]:
    """Each call's reply, the server error in its place, or None: send it the ordinary way.

    Calls refused with NOSCRIPT (a node restarted or failed over) are sent again once,
    the same way, after loading the script on every primary.
    """
    replies = _per_node(client, script, calls)
    missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        try:
            client.script_load(script.source)
        except RedisError:  # a node that cannot load it: the ordinary way reports it per call
            return [None if isinstance(reply, NoScriptError) else reply for reply in replies]
        for i, reply in zip(missing, _per_node(client, script, [calls[i] for i in missing])):
            replies[i] = None if isinstance(reply, NoScriptError) else reply
    return replies


def _per_node(client: Any, script: Script, calls: Sequence[Call]) -> list[Any]:
    groups: dict[str, tuple[Any, list[int]]] = {}
    for i, (keys, _args) in enumerate(calls):
        try:
            node = client.get_node_from_key(keys[0])
        except (RedisError, RedisClusterException):  # no node serves the slot now
            continue
        groups.setdefault(node.name, (node, []))[1].append(i)
    replies: list[Any] = [None] * len(calls)
    pending: list[tuple[Any, Any, list[int]]] = []  # written to, replies not yet read
    try:
        for node, indexes in groups.values():
            pool = _wire.lean_pool(getattr(node, "redis_connection", None))
            if pool is None:
                continue
            try:
                conn = pool.get_connection(*_wire.NAME_ARGS)
            except RedisError:
                continue
            pending.append((pool, conn, indexes))
            try:
                _wire.send(conn, [script.pack(*calls[i]) for i in indexes])
            except RedisError:
                pending.pop()
                _drop(pool, conn)
        while pending:
            pool, conn, indexes = pending[0]
            try:
                for i, reply in zip(indexes, _wire.read_replies(conn, len(indexes))):
                    replies[i] = None if isinstance(reply, _REROUTE) else reply
            except RedisError:
                conn.disconnect()  # this node's replies are lost: its calls go the ordinary way
            pending.pop(0)
            pool.release(conn)
    finally:
        for pool, conn, _indexes in pending:
            _drop(pool, conn)
    return replies


def _drop(pool: Any, conn: Any) -> None:
    """Give back a connection whose replies will not be read (closed first)."""
    conn.disconnect()
    pool.release(conn)
