"""`RedisLock`: a [`LeaseLock`][cronlock.lock.LeaseLock] on Redis, and its `RedisLeases`.

What is Redis's own: the acquire, extend and release scripts (``lock_*.lua``, one round
trip each, leases on Redis's clock), the fence key that keeps the last token for
`FENCE_GRACE_MS`, and waiting in a FIFO queue woken by the release
(`cronlock.lock._wait`). Everything else is the handle's.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import redis
from redis.exceptions import RedisError

from cronlock._scripts import Script
from cronlock._validate import Seconds, check_client, check_key, check_prefix
from cronlock.clock import monotonic
from cronlock.errors import LockNotAcquired
from cronlock.lock._handle import LeaseLock, OnLost
from cronlock.lock._lease import ACQUIRE, FENCE_GRACE_MS, WAKE_TTL_MS, holder_name, lock_keys
from cronlock.lock._wait import wait_in_queue

logger = logging.getLogger(__name__)

__all__ = ["RedisLeases", "RedisLock"]

_RELEASE = Script("lock_release")
_EXTEND = Script("lock_extend")

_ERRORS: tuple[type[BaseException], ...] = (RedisError,)


class RedisLeases:
    """One lock key's leases on Redis (the `Leases` of a `RedisLock`)."""

    __slots__ = ("_keys", "_script_keys", "client", "key", "prefix")

    errors = _ERRORS

    def __init__(self, client: Any, key: str, prefix: str) -> None:
        if not isinstance(key, str) or not isinstance(prefix, str):
            check_key(key)  # raises TypeError naming the bad value
            check_prefix(prefix)
        self._keys, self._script_keys = lock_keys(prefix, key)  # validates both
        self.key = key
        self.prefix = prefix
        # A plain redis.Redis skips check_client's isinstance against RedisCluster.
        self.client = client if type(client) is redis.Redis else check_client(client)

    def acquire(self, token: str, ttl_ms: int, wait_ms: Optional[int]) -> tuple[int, float]:
        args: list[Any] = [token, ttl_ms, holder_name(), FENCE_GRACE_MS]
        if wait_ms:
            return wait_in_queue(
                self.client, self._keys, self._script_keys, args, wait_ms=wait_ms, name=self.key
            )
        sent = monotonic()
        reply = ACQUIRE(self.client, self._script_keys, args)
        if reply[0] != 1:
            logger.debug("cronlock: lock %r is held elsewhere", self.key)
            raise LockNotAcquired(self.key)
        return int(reply[1]), sent

    def extend(self, token: str, ttl_ms: int) -> bool:
        keys = self._keys
        return (
            int(_EXTEND(self.client, [keys.lock, keys.fence], [token, ttl_ms, FENCE_GRACE_MS])) == 1
        )

    def release(self, token: str) -> bool:
        keys = self._keys
        return bool(
            int(
                _RELEASE(
                    self.client,
                    [keys.lock, keys.queue, keys.queue_expiry],
                    [token, keys.wake_prefix, WAKE_TTL_MS],
                )
            )
        )


class RedisLock(LeaseLock):
    """A [`LeaseLock`][cronlock.lock.LeaseLock] on Redis: one holder per key at a time.

    Use it as a context manager (``with RedisLock(...) as lock:``, or through
    [`redis_lock`][cronlock.lock.redis_lock]), or call ``acquire`` and ``release``
    yourself.

    Args:
        client: a ``redis.Redis`` (either ``decode_responses``) or ``RedisCluster``.
        key: the lock's name: 1-256 printable characters, no braces.
        ttl: the lease, in seconds (int, float or timedelta; millisecond precision).
        wait: ``None`` (default): raise [`LockNotAcquired`][cronlock.errors.LockNotAcquired] at once
            when the lock is held. Seconds: wait up to that long, in a first-come first-served
            queue; the release wakes the first waiter at once.
        renew: extend the lease every ``ttl / 3`` from the renewal thread of the client's pool
            while the lock is held.
        max_hold: with ``renew``, stop renewing so that the lease ends this many seconds
            after acquiring (the lock is then reported lost if still held).
        prefix: namespace of the Redis keys.
        on_lost: called with this handle (from a cronlock thread, or from the thread
            that releases) the first time the lock is found lost. Exceptions it raises
            are logged, not propagated.

    Errors of Redis (``redis.RedisError``) propagate as they are: on acquire nothing is
    held (fail closed).
    """

    def __init__(
        self,
        client: Any,
        key: str,
        ttl: Seconds,
        *,
        wait: Optional[Seconds] = None,
        renew: bool = False,
        max_hold: Optional[Seconds] = None,
        prefix: str = "cronlock",
        on_lost: Optional[OnLost] = None,
    ) -> None:
        super().__init__(
            RedisLeases(client, key, prefix),
            ttl,
            wait=wait,
            renew=renew,
            max_hold=max_hold,
            on_lost=on_lost,
        )
