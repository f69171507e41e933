"""Many calls of one script in one round trip (one per node on a cluster), on any client.

The one place that knows the three ways to send a batch: the lean path on a plain
``redis.Redis`` (`cronlock._wire`), one write per node on a ``RedisCluster``
(`cronlock._nodes`, with redirected calls sent again alone), and a redis-py pipeline
for every other client. Replies are raw (the script's own array), or the exception in a
call's place, so each caller decodes its script's replies its own way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from redis.cluster import RedisCluster
from redis.exceptions import RedisError

from cronlock import _wire
from cronlock._nodes import Call, call_per_node
from cronlock._scripts import Script, execute_pipeline


def run_many(
    client: Any, script: Script, calls: Sequence[Call], wait: Optional[tuple[int, int]] = None
) -> list[Any]:
    """Each call's raw reply, or the exception in its place, in order.

    ``wait`` (replicas, timeout ms) ends the batch with a ``WAIT`` on the same connection;
    its reply is the list's last element. Not on a cluster (a ``WAIT`` covers one
    connection's writes): there ``wait`` must be None.
    """
    if isinstance(client, RedisCluster):
        if wait is not None:
            raise ValueError("a WAIT covers one connection's writes: not on a cluster")
        return _on_cluster(client, script, calls)
    tail = None if wait is None else ("WAIT", *wait)
    replies = script.call_many(client, calls, tail and _wire.pack([_wire.encode(a) for a in tail]))
    if replies is not None:
        return replies
    pipe = client.pipeline(transaction=False)
    for keys, args in calls:
        script.queue(pipe, keys, args)
    if tail is not None:
        pipe.execute_command(*tail)
    return execute_pipeline(client, pipe, [script], repeat_last=tail is not None)


def _on_cluster(client: Any, script: Script, calls: Sequence[Call]) -> list[Any]:
    replies = call_per_node(client, script, calls)
    for i, reply in enumerate(replies):
        if reply is None:  # a redirect or a failed node: the cluster client's own way
            keys, args = calls[i]
            try:
                replies[i] = script(client, keys, args)
            except RedisError as exc:
                replies[i] = exc
    return replies
