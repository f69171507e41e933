"""The one at-fork registry: every fork hook of cronlock, run in an explicit order.

Modules register with `on_fork` and a `Phase`; the registry
calls `os.register_at_fork` once. Around every ``fork()``:

* **before**, in reverse phase order (threads' state first, pools last): `Phase.POOLS`
  holds the connection pool lock of every client that cronlock's own threads are using
  (running runners, renewing locks; see `clients_from`),
  waiting the moment a thread takes to leave it;
* **after, in the parent**, in phase order: the pools are released;
* **after, in the child**, in phase order: `Phase.POOLS` releases the pools (the child
  finds them free, and redis-py's own pid check gives it new connections on first
  use), then `Phase.STATE` gives module state new locks and empty heaps, then
  `Phase.THREADS` restarts threads (a runner started before the fork). Hooks of one
  phase run in the order they were registered.

Why the pools: redis-py's ``ConnectionPool`` holds an internal lock for a moment on every
command (to take and return a connection). If ``fork()`` happens in that moment (gunicorn
``--preload`` forking workers while a runner started at import is claiming), the child
inherits the lock *held* by a thread that does not exist there, and the child's first
command on that pool (or the pool's reset when the old client is garbage-collected)
waits forever. redis-py 5 re-creates the lock on reset, redis-py 8 does not.

Limits: only pools reached through a registered source are held (a pool that the
application's own threads use is the application's and redis-py's business); a lock
that cannot be taken within `WAIT` seconds is left alone with a WARNING rather than
stalling the fork. Relies on redis-py's private ``ConnectionPool._lock`` (present in
redis-py 5 through 8, tested in the compatibility matrix); a pool without one is skipped.
A hook that raises is logged; the others still run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from enum import IntEnum
from typing import Any, Callable, Optional

logger = logging.getLogger("cronlock")

#: Seconds the fork waits for a thread to leave a pool before leaving that pool alone.
WAIT = 5.0

Hook = Callable[[], None]


class Phase(IntEnum):
    """When a hook runs relative to the others (after a fork: in this order)."""

    POOLS = 0  # connection pool locks: held across the fork, released after it
    STATE = 1  # module state in the child: new locks, empty heaps
    THREADS = 2  # threads restarted in the child (runners)


_hooks: list[tuple[int, int, Optional[Hook], Optional[Hook], Optional[Hook]]] = []
_sources: list[Callable[[], Iterable[Any]]] = []
_held: list[Any] = []


def on_fork(
    phase: Phase,
    *,
    before: Optional[Hook] = None,
    after_in_parent: Optional[Hook] = None,
    after_in_child: Optional[Hook] = None,
) -> None:
    """Run these hooks around every ``fork()``, in ``phase`` (see the module docstring).

    Hooks run inside ``fork()``: they must be quick and must not block on other threads.
    """
    _hooks.append((phase, len(_hooks), before, after_in_parent, after_in_child))
    _hooks.sort(key=lambda hook: (hook[0], hook[1]))


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


def _run(index: int, *, reverse: bool = False) -> None:
    for hook in reversed(list(_hooks)) if reverse else list(_hooks):
        fn: Optional[Hook] = hook[index]  # type: ignore[assignment]
        if fn is None:
            continue
        try:
            fn()
        except Exception:  # one broken hook must not stop the others, nor fork()
            logger.exception("cronlock: fork hook %r raised", fn)


def _before_fork() -> None:
    _run(2, reverse=True)


def _after_in_parent() -> None:
    _run(3)


def _after_in_child() -> None:
    _run(4)


on_fork(Phase.POOLS, before=_before, after_in_parent=_after, after_in_child=_after)

if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork, after_in_parent=_after_in_parent, after_in_child=_after_in_child
    )
