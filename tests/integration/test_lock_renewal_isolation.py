"""One hold's unexpected renewal error stops neither the renewal thread nor the other holds.

Every renewing lock on one server (here: two clients on one connection pool) shares one
renewal heap. A client closed under a lock
while the renewal thread used it raised ``OSError`` (bad file descriptor), not a Redis
error; that escaped the heap's pass and no lock of the process was renewed again.
"""

from __future__ import annotations

from typing import Any

import redis

from cronlock import RedisLock
from cronlock._keys import LockKeys
from cronlock.testing import RedisServer, wait_until


class BrokenSocketClient(redis.Redis):
    """A real client whose EVALSHA fails the way a socket closed under it does."""

    broken = False

    def evalsha(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise OSError(9, "Bad file descriptor")
        return super().evalsha(*args, **kwargs)


def test_a_hold_whose_renewal_raises_does_not_stop_the_others(redis_server: RedisServer) -> None:
    healthy = redis.Redis.from_url(redis_server.url, socket_timeout=5)
    broken = BrokenSocketClient(connection_pool=healthy.connection_pool)  # one renewal heap
    failing = RedisLock(broken, "iso-broken", ttl=1.0, renew=True).acquire()
    kept = RedisLock(healthy, "iso-kept", ttl=1.0, renew=True).acquire()
    try:
        broken.broken = True
        key = LockKeys.of("cronlock", "iso-kept").lock
        samples = [healthy.pttl(key)]

        def renewed_three_times() -> bool:
            samples.append(healthy.pttl(key))
            return sum(b > a for a, b in zip(samples, samples[1:])) >= 3

        wait_until(renewed_three_times, timeout=10, interval=0.02)  # three ttls and more
        assert not kept.lost.is_set()
        wait_until(failing.lost.is_set, timeout=5)  # the broken one is reported lost
    finally:
        kept.release()
        broken.broken = False
        failing.release()
        broken.close()
        healthy.close()
