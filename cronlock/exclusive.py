"""``@exclusive``: run a function on one process cluster-wide at a time; ``configure``.

Example:
    ```python
    cronlock.configure(client=redis.Redis.from_url("redis://localhost:6379/0"))

    @exclusive("nightly-import", ttl=600)
    def nightly_import() -> None:
        ...

    nightly_import()   # runs here, or returns None (INFO log) if running elsewhere
    ```

The client is, in order: the ``client=`` argument, the one given to
[`configure`][cronlock.exclusive.configure], or one made from ``$CRONLOCK_REDIS_URL`` (else
``$REDIS_URL``) on the first call that needs it (never at import or decoration time), shared by
every decorated function.
"""

from __future__ import annotations

from cronlock.lock.exclusive import configure, default_client, exclusive

__all__ = ["configure", "default_client", "exclusive"]
