"""The lock primitive: one holder per key at a time, across processes and machines.

One handle, [`LeaseLock`][cronlock.lock.LeaseLock], serves every store through the
store's [`Leases`][cronlock.lock.Leases]: [`redis_lock`][cronlock.lock.redis_lock] is it
on Redis (a [`RedisLock`][cronlock.lock.RedisLock]),
[`store_lock`][cronlock.stores.store_lock] on any store (SQLite, PostgreSQL: one
transaction per step, waiters poll). What follows is said of Redis; the SQL stores keep
the same contract (docs/locks.md).

Guarantees:

* **Mutual exclusion while the lease is valid.** Acquire is one Lua script (``SET NX PX``
  plus a fencing token); release is compare-and-delete by a random token, so a holder
  whose lease lapsed can never delete its successor's key.
* **Fencing tokens** strictly increase for every successful acquire of one key. Pass
  them to the resource you protect: it is what stops a holder that was frozen past its
  lease (GC pause, SIGSTOP, a lost network) from acting on stale authority.
* **Loud loss.** A lock that expired or was taken is reported through ``lock.lost``
  (a `threading.Event`), the ``on_lost`` callback, a WARNING log,
  [`LeaseLock.check`][cronlock.lock.LeaseLock.check], and [`LockLost`][cronlock.errors.LockLost]
  raised when the ``with`` block exits (unless the block itself raised: that exception wins).
* **Fail closed.** If Redis cannot be reached while acquiring, redis-py's error
  propagates; nothing is ever reported as acquired without the server's word.

Limits: the lease is measured on Redis's clock, the handle's
[`remaining`][cronlock.lock.LeaseLock.remaining] on this process's monotonic clock minus a drift
margin; neither protects against a Redis failover that loses the key (use fencing tokens for that).

Fencing tokens are ``max(previous token + 1, Redis TIME in microseconds)``. The previous
token is kept in the lock's fence key, which outlives the lock by 60 s
(`FENCE_GRACE_MS`) and then expires, so a lock key costs no memory once it is no
longer used; after that, Redis's clock alone keeps tokens increasing, as long as the
server's clock does not step back by more than those 60 s.

A race that compare-and-delete prevents, as a timeline:

```text
1. A acquires (token a, ttl 10 s), then freezes for 12 s.
2. The key expires; B acquires (token b).
3. A wakes and releases: the script sees b != a and deletes nothing (reply 0),
   A's handle reports the lock lost, and B keeps its lock.
```

Example:
    ```python
    with redis_lock(client, "billing:close-month", ttl=30, wait=5) as lock:
        write_invoices(fence=lock.fencing_token)
    ```
"""

from __future__ import annotations

from typing import Any, Optional

from cronlock._validate import Seconds
from cronlock.lock._handle import LeaseLock, OnLost
from cronlock.lock._inspect import LockInfo, inspect
from cronlock.lock._leases import Leases
from cronlock.lock._redislock import RedisLock

__all__ = ["LeaseLock", "Leases", "LockInfo", "OnLost", "RedisLock", "inspect", "redis_lock"]


def redis_lock(
    client: Any,
    key: str,
    ttl: Seconds,
    *,
    wait: Optional[Seconds] = None,
    renew: bool = False,
    max_hold: Optional[Seconds] = None,
    prefix: str = "cronlock",
    on_lost: Optional[OnLost] = None,
) -> RedisLock:
    """A lock to use in a ``with`` block; it acquires on entry and releases on exit.

    Arguments are [`RedisLock`][cronlock.lock.RedisLock]'s, all checked before anything is sent to
    Redis.

    Example:
        ```python
        with redis_lock(client, "reports:daily", ttl=30, renew=True) as lock:
            build_report(fence=lock.fencing_token)
        ```
    """
    return RedisLock(
        client,
        key,
        ttl,
        wait=wait,
        renew=renew,
        max_hold=max_hold,
        prefix=prefix,
        on_lost=on_lost,
    )
