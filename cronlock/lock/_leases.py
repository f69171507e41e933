"""`Leases`: what a lock handle asks of the store that keeps its lease.

A [`LeaseLock`][cronlock.lock.LeaseLock] holds the machinery every lock shares (token,
fencing token, loss, renewal, ``with``, fork safety); its `Leases` are the three atomic
steps one store offers for one key, each decided on the store's clock:

* acquire: take the key for ``ttl_ms`` unless it is held (waiting as the store can:
  Redis's FIFO queue woken by the release, SQL's bounded polling);
* extend: make the lease last ``ttl_ms`` from now, only while ``token`` holds it;
* release: free it, only while ``token`` holds it (a stranger's release frees nothing).

Redis's are `cronlock.lock._redislock.RedisLeases`; SQL stores' are
`cronlock.stores.sql.leases.SqlLeases`. The dependency goes one way: stores implement
this protocol, the lock never imports a store.

A `Leases` may also have a ``server`` attribute: the identity whose renewal thread
renews its locks (`cronlock.lock.renewer.server_of`; SQL stores give the store). Without
one, the ``client`` is used, and with neither the process's shared renewal thread.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

__all__ = ["Leases"]


class Leases(Protocol):
    """One key's leases on one store (see the module docstring)."""

    #: The lock's name (validated by the implementation).
    key: str
    #: The namespace of the store's records.
    prefix: str
    #: What a call raises when the store cannot be reached or refuses it.
    errors: tuple[type[BaseException], ...]
    #: A redis-py client whose pools are held across ``fork()`` while the renewal thread
    #: uses it; None for a store that keeps its connections per process.
    client: Any

    def acquire(self, token: str, ttl_ms: int, wait_ms: Optional[int]) -> tuple[int, float]:
        """Take the lease for ``token``: (fencing token, `cronlock.clock.monotonic()` when
        the winning request was sent).

        Raises:
            LockNotAcquired: held elsewhere (and, with ``wait_ms``, not freed in time).
            Exception: one of `errors`; nothing is held (fail closed).
        """

    def extend(self, token: str, ttl_ms: int) -> bool:
        """Make ``token``'s lease last ``ttl_ms`` from now; False if it is not ``token``'s."""

    def release(self, token: str) -> bool:
        """Free the lease if ``token`` holds it (waking a waiter); False otherwise."""
