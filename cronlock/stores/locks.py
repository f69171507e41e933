"""`store_lock`: the lock of [`redis_lock`][cronlock.lock.redis_lock] on any store.

The same handle ([`LeaseLock`][cronlock.lock.LeaseLock]) and the same contract on every
store: a fencing token strictly increasing per key, a release that frees only its own
lease, renewal, waiting, [`LockNotAcquired`][cronlock.errors.LockNotAcquired], and a loss
reported through ``lock.lost``, ``on_lost`` and [`LockLost`][cronlock.errors.LockLost]
at ``with`` exit. What differs is how a waiter learns of a release: Redis wakes the
first waiter of a FIFO queue; an SQL store's waiters poll, noticing a release within
0.1 s, in no particular order (docs/locks.md).
"""

from __future__ import annotations

from typing import Any, Optional

import redis
from redis.cluster import RedisCluster

from cronlock._validate import Seconds
from cronlock.lock import LeaseLock, OnLost, RedisLock
from cronlock.stores.redis import RedisStore
from cronlock.stores.sql.claimpath import SqlClaimPath
from cronlock.stores.sql.leases import SqlLeases

__all__ = ["store_lock"]


def store_lock(
    store: Any,
    key: str,
    ttl: Seconds,
    *,
    wait: Optional[Seconds] = None,
    renew: bool = False,
    max_hold: Optional[Seconds] = None,
    on_lost: Optional[OnLost] = None,
) -> LeaseLock:
    """A lock on ``store`` to use in a ``with`` block; it acquires on entry and releases on exit.

    Args:
        store: a [`RedisStore`][cronlock.stores.RedisStore] or a redis-py client (the
            lock is then a [`RedisLock`][cronlock.lock.RedisLock] on that client, under
            the store's prefix, ``"cronlock"`` for a client), an
            [`SqliteStore`][cronlock.stores.SqliteStore], a ``PostgresStore`` or another
            [`SqlStore`][cronlock.stores.sql.SqlStore] (under the store's prefix).
        key: the lock's name: 1-256 printable characters, no braces (on every store, so
            a key moves between stores unchanged).
        ttl: the lease, in seconds (int, float or timedelta; millisecond precision).
        wait: ``None``: raise at once when held; seconds: wait up to that long.
        renew: extend the lease every ``ttl / 3`` while held.
        max_hold: with ``renew``, end the lease this many seconds after acquiring.
        on_lost: called with the handle the first time the lock is found lost.

    Every argument is checked before anything is sent to the store; they mean what they
    mean for [`redis_lock`][cronlock.lock.redis_lock].

    Raises:
        TypeError: ``store`` is none of those (the message names it).

    Example:
        ```python
        with store_lock(SqliteStore("jobs.db"), "reports:daily", ttl=30) as lock:
            build_report(fence=lock.fencing_token)
        ```
    """
    if isinstance(store, (redis.Redis, RedisCluster)):
        store = RedisStore(store)  # a client means a RedisStore, as everywhere
    if isinstance(store, RedisStore):
        return RedisLock(
            store.client,
            key,
            ttl,
            wait=wait,
            renew=renew,
            max_hold=max_hold,
            prefix=store.prefix,
            on_lost=on_lost,
        )
    if isinstance(store, SqlClaimPath):
        return LeaseLock(
            SqlLeases(store, key), ttl, wait=wait, renew=renew, max_hold=max_hold, on_lost=on_lost
        )
    raise TypeError(
        "store must be a RedisStore, a redis-py client or an SQL store (SqliteStore,"
        f" PostgresStore); got {store!r}"
    )
