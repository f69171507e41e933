"""Renewal of held locks from the process's one shared renewal thread.

Each hold of a :class:`~cronlock.lock.RedisLock` with ``renew=True`` puts one
:class:`Renewal` on :func:`cronlock._renewer.get_renewer`'s heap, due every ``ttl / 3``.
A renewal:

* stops quietly once the hold ends (release, re-acquire: a generation number tells);
* marks the lock lost (WARNING, ``on_lost``) when the script says the key is not ours;
* on a Redis error, logs a WARNING and retries while the lease may still be valid, and
  marks the lock lost once :meth:`~cronlock.lock.RedisLock.remaining` reaches 0;
* with ``max_hold``, asks for shorter leases so the lock ends ``max_hold`` after the
  acquire, then marks it lost if it is still held.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Optional

from redis.exceptions import RedisError

if TYPE_CHECKING:
    from cronlock.lock import RedisLock

logger = logging.getLogger("cronlock.lock")


class Renewal:
    """One hold's entry in the shared renewer; stops when the hold ends."""

    def __init__(self, lock: RedisLock, generation: int) -> None:
        self.lock = lock
        self.generation = generation
        self.interval = lock.ttl / 3

    def _current(self) -> Optional[str]:
        lock = self.lock
        with lock._state:
            live = lock._generation == self.generation and lock._held and not lock._releasing
            return lock.token if live and not lock.lost.is_set() else None

    def _next_ttl_ms(self, now: float) -> int:
        """The lease to ask for: the ttl, cut short so it ends at max_hold."""
        lock = self.lock
        if lock._max_hold is None:
            return lock._ttl_ms
        return min(lock._ttl_ms, int((lock._acquired_at + lock._max_hold - now) * 1000))

    def renew_due(self) -> Optional[float]:
        lock = self.lock
        token = self._current()
        if token is None:
            return None
        now = time.monotonic()
        ttl_ms = self._next_ttl_ms(now)
        if ttl_ms <= 0:
            lock._mark_lost(f"max_hold={lock._max_hold:g} s reached; renewal stopped")
            return None
        try:
            ok = lock._extend(token, ttl_ms)
        except RedisError as error:
            return self._failed(error)
        if not ok:
            if self._current() is not None:  # not released meanwhile: really lost
                lock._mark_lost("renewal found another owner or no key")
            return None
        if ttl_ms < lock._ttl_ms:  # last renewal before max_hold: report when it ends
            return now + ttl_ms / 1000
        return now + self.interval

    def _failed(self, error: RedisError) -> Optional[float]:
        """Redis could not be asked: retry while the lease may still be valid."""
        lock = self.lock
        left = lock.remaining()
        if left <= 0:
            lock._mark_lost(f"renewal failed ({error!r}) until the lease ran out")
            return None
        logger.warning(
            "cronlock: renewing lock %r failed (%r); retrying, lease valid %.3f s more",
            lock.key,
            error,
            left,
        )
        return time.monotonic() + max(0.05, min(self.interval, left))

    def __repr__(self) -> str:
        return f"Renewal({self.lock!r})"
