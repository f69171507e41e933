"""Waiting for a lock: a first-come first-served queue with a wake-up list per waiter.

How a wait goes (each step is one round trip):

1. The acquire script loses and puts the waiter in the lock's queue (a zset scored by
   its first arrival, kept across retries) with a place that lapses ``PLACE_MS`` after
   its latest attempt.
2. The waiter blocks (``BLPOP``) on its own wake list for at most the shortest of: the
   wait left, the holder's remaining lease, `HEARTBEAT` and a bound below the
   client's ``socket_timeout`` (so redis-py never times out a healthy block).
3. The release script ``LPUSH``es to the wake list of the queue's first live waiter:
   exactly that waiter retries at once; nobody else stampedes. A free lock goes only to
   the queue's head, so waiters are served in arrival order.
4. Otherwise the waiter retries when its block times out, refreshing its place. A
   waiter that died keeps the head for at most ``PLACE_MS``; one that gives up removes
   itself and passes a pending wake-up on (``lock_leave.lua``).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from redis.exceptions import RedisError

from cronlock._keys import LockKeys
from cronlock._scripts import Script, text
from cronlock.clock import monotonic
from cronlock.errors import LockNotAcquired
from cronlock.lock._lease import ACQUIRE, PLACE_MS, WAKE_TTL_MS

logger = logging.getLogger(__name__)

#: The longest a waiter blocks before looking again (seconds).
HEARTBEAT = 1.0
#: The shortest block sent to Redis: BLPOP treats a timeout under 1 ms as "forever".
_MIN_BLOCK = 0.002

_LEAVE = Script("lock_leave")


def block_cap(client: Any) -> float:
    """The longest block this client can wait for without hitting its socket timeout."""
    socket_timeout = client.get_connection_kwargs().get("socket_timeout")
    if socket_timeout is None:
        return HEARTBEAT
    timeout = float(socket_timeout)
    return min(HEARTBEAT, max(timeout * 0.5, timeout - 0.5))


def wait_block_seconds(client: Any, deadline: float, pttl_ms: int) -> Optional[float]:
    """How long to block before retrying, or None when the wait is over.

    ``pttl_ms`` is the holder's remaining lease from the acquire reply (negative: no
    holder, another waiter is first in line).
    """
    left = deadline - monotonic()
    if left <= 0:
        return None
    block = min(left, block_cap(client))
    if pttl_ms > 0:
        # Wake when the lease ends, in case the holder died without releasing.
        block = min(block, pttl_ms / 1000 + 0.001)
    return round(max(block, _MIN_BLOCK), 3)


def leave_queue(client: Any, keys: LockKeys, token: str, wake_ttl_ms: int) -> None:
    """Best effort: drop a waiter's place (and pass on a wake-up it may have taken)."""
    try:
        _LEAVE(
            client,
            [keys.lock, keys.queue, keys.queue_expiry, keys.wake(token)],
            [token, keys.wake_prefix, wake_ttl_ms],
        )
    except RedisError as error:  # its place lapses by itself within PLACE_MS
        logger.debug("cronlock: could not leave the queue of %r: %r", keys.lock, error)


def wait_in_queue(
    client: Any, keys: LockKeys, script_keys: list[str], args: list[Any], *, wait_ms: int, name: str
) -> tuple[int, float]:
    """Acquire within ``wait_ms``, in the queue: (fencing token, when the win was sent).

    ``script_keys`` and ``args`` are the acquire script's for a try without waiting; the
    waiter's wake key, place lifetime and arrival are added here.

    Raises:
        LockNotAcquired: not freed (or not our turn) in time; our place is given up.
    """
    token = args[0]
    script_keys = [*script_keys, keys.wake_prefix + token]
    args = [*args, PLACE_MS, ""]
    sent = monotonic()
    deadline = sent + wait_ms / 1000
    try:
        while True:
            reply = ACQUIRE(client, script_keys, args)
            if reply[0] == 1:
                return int(reply[1]), sent
            args[5] = text(reply[2])  # keep our place (arrival) in the queue
            block = wait_block_seconds(client, deadline, int(reply[1]))
            if block is None:
                raise LockNotAcquired(
                    name, f"lock {name!r} not acquired within {wait_ms / 1000:g} s"
                )
            client.blpop([keys.wake_prefix + token], timeout=block)
            sent = monotonic()
    except BaseException:
        leave_queue(client, keys, token, WAKE_TTL_MS)
        raise
