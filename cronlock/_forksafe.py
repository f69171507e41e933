"""Keep redis-py connection pools usable in a child forked while cronlock's threads use them.

redis-py's ``ConnectionPool`` holds an internal lock for a moment on every command (to
take and return a connection). If ``fork()`` happens in that moment (gunicorn
``--preload`` forking workers while a runner started at import is claiming), the child
inherits the lock *held* by a thread that does not exist there, and the child's first
command on that pool (or the pool's reset when the old client is garbage-collected)
waits forever. redis-py 5 re-creates the lock on reset, redis-py 8 does not.

So, around every ``fork()``:

* before: acquire the pool lock of every client that cronlock's own threads are using
  (running runners, renewing locks; see `clients_from`), waiting the moment a
  thread takes to leave it;
* after, in the parent and in the child: release them. The child then finds the pools
  free, and redis-py's own pid check gives it new connections on first use.

Limits: only pools reached through a registered source are held (a pool that the
application's own threads use is the application's and redis-py's business); a lock
that cannot be taken within `WAIT` seconds is left alone with a WARNING rather than
stalling the fork. Relies on redis-py's private ``ConnectionPool._lock`` (present in
redis-py 5 through 8, tested in the compatibility matrix); a pool without one is skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any, Callable

logger = logging.getLogger("cronlock")

#: Seconds the fork waits for a thread to leave a pool before leaving that pool alone.
WAIT = 5.0

_sources: list[Callable[[], Iterable[Any]]] = []
_held: list[Any] = []


def clients_from(source: Callable[[], Iterable[Any]]) -> None:
    """Register ``source()``: the redis-py clients cronlock's threads may be using now.

    Called once at import by the modules that own such threads. A source must not block
    (it runs in ``fork()``) and must not raise.
    """
    _sources.append(source)


def _pools_of(client: Any) -> list[Any]:
    """The connection pools behind a client (one; or one per node for a cluster)."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        return [pool]
    nodes = getattr(getattr(client, "nodes_manager", None), "nodes_cache", None) or {}
    return [
        node.redis_connection.connection_pool
        for node in list(nodes.values())
        if getattr(node, "redis_connection", None) is not None
    ]


def _locks() -> list[Any]:
    """Each pool lock once, in a fixed order (two forking threads take them alike)."""
    locks: dict[int, Any] = {}
    for source in _sources:
        try:
            clients = list(source())
        except Exception:  # a source must not break fork(); its pools just go unheld
            logger.exception("cronlock: could not list clients before fork")
            continue
        for client in clients:
            for pool in _pools_of(client):
                lock = getattr(pool, "_lock", None)
                if lock is not None:
                    locks[id(lock)] = lock
    return [locks[k] for k in sorted(locks)]


def _before() -> None:
    for lock in _locks():
        if lock.acquire(timeout=WAIT):
            _held.append(lock)
        else:
            logger.warning(
                "cronlock: a Redis connection pool stayed busy for %.0f s at fork(); "
                "the child may not be able to use it",
                WAIT,
            )


def _after() -> None:
    while _held:
        _held.pop().release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before, after_in_parent=_after, after_in_child=_after)
